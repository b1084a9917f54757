/*
 * flowpy._cbuffered: the compiled BufferedSubscription.
 *
 * This is the C twin of flowpy/_buffered.py, which stays the readable
 * reference: the same methods, the same state, the same observable
 * behaviour. Read that file first; the comments here cover only what is
 * particular to C.
 *
 * Locking. The Python reference guards its state with a threading.Lock and
 * pairs racy reads Dekker-style. Here a subscription's state is read and
 * changed only in "sections": runs of C statements between SECTION_BEGIN(self)
 * and SECTION_END(self) that call no Python code. The sections correspond one
 * to one to the `with self._lock:` blocks and the racy store-then-load pairs
 * of the reference, and each leaves the object consistent.
 *
 *   - With the GIL, the two macros compile to nothing: a run of C code that
 *     calls no Python code (no method, no Py_DECREF that may run __del__, no
 *     allocation of a GC object that may run a collection) and does not
 *     release the GIL is atomic, since no other thread runs meanwhile.
 *   - Without it (a free-threaded build, Py_GIL_DISABLED), they lock and
 *     unlock the subscription's PyMutex, so the sections are atomic by
 *     mutual exclusion, and the unlock of one and the lock of the next order
 *     every store before every later load, across threads.
 *
 * The rules this file keeps:
 *
 *   - Every field of BufObject but the immutable ones (handler, space,
 *     context) and `consumer` (below) is read and written only
 *     inside a section.
 *   - The flags are the bits of one word, `ctl`, as in the JDK's
 *     BufferedSubscription, with the reference's names (CTL_BITS). A bit is
 *     changed by a read-modify-write of the whole word, so every access, even
 *     to OPENED, which only the holder of the task changes, is in a section
 *     (ctl_has, ctl_set, ctl_clear). No flag is racy: each store-then-load
 *     pair of the reference is one section on each side (offer_item appends
 *     and loads RUNNING, exit_handshake clears it and loads the buffer;
 *     wait_for_space sets WAITING and ALERT and looks for space, the
 *     consumer pops and looks at ALERT; signal_error sets STOP and ALERT,
 *     the consumer clears ALERT where it loads STOP), so mutual exclusion
 *     orders them and no atomics are needed.
 *   - No Python code runs inside a section, and no reference is released in
 *     one: a __del__ could call back into this object, and the mutex is not
 *     re-entrant. References given up inside a section (the executor on
 *     close, an old pending error, buffered items on release) are moved to
 *     locals and released only after the section ends.
 *   - No subscriber method and no handler is ever called inside a section,
 *     which is the reference's "never under self._lock".
 *   - Sections never nest, and none takes another lock: a section never
 *     waits for anything but the end of another thread's section.
 *   - Borrowed pointers into the ring are never kept outside a section: the
 *     ring may be reallocated by the producer, or freed on close.
 *   - `consumer` (and the ProducerLock's `owner` and `count`) are read
 *     without a section by other threads, who only compare them with their
 *     own thread ident: they are relaxed atomics (ATOMIC_LOAD/ATOMIC_STORE),
 *     which suffices because a thread can only find its own ident there if
 *     it stored it itself (see the ProducerLock).
 *
 * Without the GIL the module declares Py_MOD_GIL_NOT_USED: importing it
 * leaves the GIL off.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "pythread.h"
#include <stddef.h>  /* offsetof */

#ifndef Py_T_PYSSIZET
#include "structmember.h"
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_T_OBJECT_EX T_OBJECT_EX
#define Py_T_ULONG T_ULONG
#define Py_T_BOOL T_BOOL
#define Py_T_LONGLONG T_LONGLONG
#define Py_READONLY READONLY
#endif

#ifdef Py_GIL_DISABLED
#if !defined(__GNUC__) && !defined(__clang__)
#error "a free-threaded build of flowpy._cbuffered needs the __atomic builtins of GCC or Clang"
#endif
/* A section of a subscription's state (see "Locking" above). */
#define SECTION_BEGIN(self) PyMutex_Lock(&(self)->mutex)
#define SECTION_END(self) PyMutex_Unlock(&(self)->mutex)
/* A field read by other threads without a section: a relaxed atomic. */
#define ATOMIC_LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)
#define ATOMIC_STORE(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)
#else
/* With the GIL a section is atomic as it is (see "Locking" above). */
#define SECTION_BEGIN(self) ((void)0)
#define SECTION_END(self) ((void)0)
#define ATOMIC_LOAD(field) (field)
#define ATOMIC_STORE(field, value) ((void)((field) = (value)))
#endif

#define MAX_DEMAND 0x7fffffffffffffffLL /* 2**63 - 1: unbounded (rule 3.17) */
#define INITIAL_RING 32                 /* first ring allocation, as in the JDK */
#define CLAIM_DELAY_NO_GIL 0.001        /* the reference's CLAIM_DELAY while the GIL is off */

typedef struct {
    PyObject *type;
    PyObject *str_on_subscribe;
    PyObject *str_on_next;
    PyObject *str_on_error;
    PyObject *str_on_complete;
    PyObject *str_acquire;
    PyObject *str_release;
    PyObject *str_notify_all;
    PyObject *str_wait;
    /* The reference's CLAIM_DELAY: 0 if the GIL was on at exec, else CLAIM_DELAY_NO_GIL. */
    double claim_delay;
} module_state;

typedef struct {
    PyObject_HEAD
#ifdef Py_GIL_DISABLED
    PyMutex mutex; /* held for each section: guards every field below but the immutable ones and `consumer` */
#endif
    /* The subscriber; NULL (None to Python) once closed (rule 3.13). */
    PyObject *subscriber;
    /* Immutable from here to `context` (until tp_clear, when no thread can reach the object). */
    PyObject *handler;  /* handler(subscriber, exc) when on_next raises; NULL if none */
    PyObject *space;    /* the publisher's threading.Condition for producers waiting for space */
    /* The subscriber's copy of the context current at subscribe() (flowpy/_context.py),
       or NULL: every signal and the handler run in it. Entered only by the thread
       holding the consumer task, and exited in the section that clears RUNNING. */
    PyObject *context;
    PyObject *weakreflist;

    /* --- The buffer: appended to by the producer, popped by the consumer --- */
    PyObject **ring;     /* power-of-two array of `size` slots; NULL before the first offer */
    Py_ssize_t size;
    Py_ssize_t head;     /* index of the oldest item */
    Py_ssize_t count;    /* items buffered */
    Py_ssize_t capacity; /* slots the producer may fill; 0 once closed */
    /* While WAITING is set: a pop that leaves at most this many items wakes
       the waiting producer; a pop that leaves more keeps ALERT set, and the
       end of the batch wakes it whatever is left (see on_alert_locked).
       Set by wait_for_space with WAITING. */
    Py_ssize_t wake_level;

    /* --- The reference's lock-guarded state (see the sections above) --- */
    long long demand;        /* outstanding request(n) total; MAX_DEMAND = unbounded */
    PyObject *pending_error; /* the error for a due on_error, or NULL */
    PyObject *execute;       /* hands a task to the executor; NULL once closed */
    /* Every flag in one word, as the JDK's BufferedSubscription keeps its
       `ctl`: read and written only in sections, through ctl_has, ctl_set and
       ctl_clear (below). The bits and their names are the reference's. */
    unsigned int ctl;
#define CTL_RUNNING 0x001u  /* a consumer task is pending or running; set forever once closed */
#define CTL_PENDING 0x002u  /* a task was handed to the executor and no thread has claimed it */
#define CTL_QUEUED 0x004u   /* a task handed to the executor has not started yet (see the reference) */
#define CTL_COMPLETE 0x008u /* on_complete is due once the buffer is empty */
#define CTL_STOP 0x010u     /* on_error or a silent cancel is due; buffered items are dropped */
#define CTL_CLOSED 0x020u   /* terminal; set before the terminal signal is delivered */
#define CTL_OPENED 0x040u   /* on_subscribe was delivered; set by the holder of the task, before the call */
#define CTL_ALERT 0x080u    /* look at STOP and WAITING before delivering the next item; set by any
                               thread in the section that sets STOP or WAITING, cleared only in the
                               consumer's section that looks at both (on_alert_locked) */
#define CTL_WAITING 0x100u  /* a producer waits for space; written under the publisher's lock: set with
                               ALERT by wait_for_space, cleared by stop_waiting or by the consumer
                               that wakes the producer (signal_waiter) */

    /* --- Consumer task only; read by producers on the slow path --- */
    /* Handed from one holder of the task to the next by the sections that
       give the task up and claim it, so only `consumer` is read by others. */
    unsigned long consumer; /* ident of the thread inside consume(), 0 if none; ATOMIC_LOAD/ATOMIC_STORE */
    long long delivered;    /* on_next calls that returned; added once per batch, with the demand it used up */

    /* --- Producer only (under the publisher's lock), on the drop path --- */
    long long dropped; /* offers dropped for this subscriber because its buffer was full */
} BufObject;

static inline module_state *
state_of(BufObject *self)
{
    return (module_state *)PyType_GetModuleState(Py_TYPE(self));
}

/* --- The flags, in the caller's section ------------------------------------ */

/* Whether any of `bits` is set. */
static inline int
ctl_has(BufObject *self, unsigned int bits)
{
    return (self->ctl & bits) != 0;
}

static inline void
ctl_set(BufObject *self, unsigned int bits)
{
    self->ctl |= bits;
}

static inline void
ctl_clear(BufObject *self, unsigned int bits)
{
    self->ctl &= ~bits;
}

/* --- Exceptions: the same on 3.10 to 3.13 -------------------------------- */

/* Take the raised exception (normalised, traceback attached); NULL if none. */
static PyObject *
take_exception(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type == NULL) {
        return NULL;
    }
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL) {
        PyException_SetTraceback(value, tb);
        Py_DECREF(tb);
    }
    Py_DECREF(type);
    return value;
#endif
}

/* Raise `exc` again; steals the reference. */
static void
restore_exception(PyObject *exc)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyObject *tb = PyException_GetTraceback(exc);
    PyObject *type = (PyObject *)Py_TYPE(exc);
    Py_INCREF(type);
    PyErr_Restore(type, exc, tb);
#endif
}

/* While `earlier` (stolen) was propagating, another exception was raised:
   keep the new one, with `earlier` as its __context__, as Python does. */
static void
chain_exception(PyObject *earlier)
{
    PyObject *later = take_exception();
    if (later == NULL) {
        restore_exception(earlier);
        return;
    }
    if (later != earlier) {
        PyException_SetContext(later, earlier); /* steals earlier */
    }
    else {
        Py_DECREF(earlier);
    }
    restore_exception(later);
}

static inline int
is_exception(PyObject *exc)
{
    return PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_Exception);
}

/* Py_XDECREF of what may be a last reference, whose __del__ then runs Python
   code, while an exception may be raised: it is set aside meanwhile. */
static void
release_keeping_error(PyObject *obj)
{
    if (obj == NULL) {
        return;
    }
    PyObject *pending = take_exception();
    Py_DECREF(obj);
    if (pending != NULL) {
        restore_exception(pending);
    }
}

/* --- The ring ---------------------------------------------------------------- */

/* Room for `needed` items in all; may reallocate. Inside a section: returns
   -1 without setting the MemoryError, which the caller raises after it. */
static int
ring_grow(BufObject *self, Py_ssize_t needed)
{
    if (needed <= self->size) {
        return 0;
    }
    Py_ssize_t size = self->size ? self->size : INITIAL_RING;
    while (size < needed) {
        if (size > PY_SSIZE_T_MAX / 2) {
            return -1;
        }
        size *= 2;
    }
    PyObject **ring = PyMem_New(PyObject *, size);
    if (ring == NULL) {
        return -1;
    }
    Py_ssize_t mask = self->size - 1;
    for (Py_ssize_t i = 0; i < self->count; i++) {
        ring[i] = self->ring[(self->head + i) & mask];
    }
    PyMem_Free(self->ring);
    self->ring = ring;
    self->size = size;
    self->head = 0;
    return 0;
}

static inline int
ring_reserve(BufObject *self)
{
    return self->count < self->size ? 0 : ring_grow(self, self->count + 1);
}

/* Remove and return the oldest item (a new reference to the caller); in a section. */
static inline PyObject *
ring_pop(BufObject *self)
{
    PyObject *item = self->ring[self->head];
    self->head = (self->head + 1) & (self->size - 1);
    self->count--;
    return item;
}

/* Empty the buffer: detach in one section, then release the items. */
static void
ring_clear(BufObject *self)
{
    SECTION_BEGIN(self);
    PyObject **ring = self->ring;
    Py_ssize_t size = self->size, head = self->head, count = self->count;
    self->ring = NULL;
    self->size = self->head = self->count = 0;
    SECTION_END(self);
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_DECREF(ring[(head + i) & (size - 1)]);
    }
    PyMem_Free(ring);
}

/* --- Small sections ------------------------------------------------------------ */

/* Mark closed (the reference's _close_locked), in the caller's section.
   Returns the executor, which the caller releases once the section is over. */
static PyObject *
close_section(BufObject *self)
{
    PyObject *execute = self->execute;
    ctl_set(self, CTL_CLOSED | CTL_RUNNING | CTL_STOP | CTL_ALERT);
    /* The caller delivers the terminal signal itself, so none stays due: the
       reference clears COMPLETE as it delivers on_complete. */
    ctl_clear(self, CTL_COMPLETE);
    self->capacity = 0;
    self->execute = NULL;
    return execute;
}

/* Take over the pending work, in the caller's section: 1 if this thread now
   holds the task, 0 if no work was pending (another thread claimed it). */
static inline int
claim_pending_locked(BufObject *self)
{
    if (!ctl_has(self, CTL_PENDING)) {
        return 0;
    }
    ctl_clear(self, CTL_PENDING);
    return 1;
}

/* claim_pending_locked in a section of its own. */
static int
claim_pending(BufObject *self)
{
    SECTION_BEGIN(self);
    int claimed = claim_pending_locked(self);
    SECTION_END(self);
    return claimed;
}

/* WAITING, read in a section of its own. */
static inline char
load_waiting(BufObject *self)
{
    SECTION_BEGIN(self);
    char waiting = (char)ctl_has(self, CTL_WAITING);
    SECTION_END(self);
    return waiting;
}

/* Clear WAITING, in a section of its own. */
static inline void
clear_waiting(BufObject *self)
{
    SECTION_BEGIN(self);
    ctl_clear(self, CTL_WAITING);
    SECTION_END(self);
}

/* --- Slow paths that call Python ---------------------------------------------- */

static int consume(BufObject *self);

/* with space: space.notify_all(); clear WAITING */
static int
signal_waiter(BufObject *self)
{
    module_state *st = state_of(self);
    PyObject *space = Py_NewRef(self->space);
    PyObject *r = PyObject_CallMethodNoArgs(space, st->str_acquire);
    if (r == NULL) {
        Py_DECREF(space);
        return -1;
    }
    Py_DECREF(r);
    /* Notify first: if it fails (an interrupt in notify_all, which is Python
       code), WAITING stays set and the next signal notifies again. */
    r = PyObject_CallMethodNoArgs(space, st->str_notify_all);
    PyObject *earlier = NULL;
    if (r == NULL) {
        earlier = take_exception();
    }
    else {
        Py_DECREF(r);
        clear_waiting(self);
    }
    r = PyObject_CallMethodNoArgs(space, st->str_release);
    Py_DECREF(space);
    if (r == NULL) {
        if (earlier != NULL) {
            chain_exception(earlier);
        }
        return -1;
    }
    Py_DECREF(r);
    if (earlier != NULL) {
        restore_exception(earlier);
        return -1;
    }
    return 0;
}

/* Drop the buffer and the subscriber (rule 3.13) and free a waiting producer. */
static int
release(BufObject *self)
{
    ring_clear(self);
    SECTION_BEGIN(self);
    PyObject *subscriber = self->subscriber;
    self->subscriber = NULL;
    SECTION_END(self);
    Py_XDECREF(subscriber);
    if (load_waiting(self)) {
        return signal_waiter(self);
    }
    return 0;
}

/* Run `release` while `earlier` (stolen, or NULL) propagates: the `finally:`
   of the reference. Returns -1 with an exception set if either failed. */
static int
release_finally(BufObject *self, PyObject *earlier)
{
    if (release(self) < 0) {
        if (earlier != NULL) {
            chain_exception(earlier);
        }
        return -1;
    }
    if (earlier != NULL) {
        restore_exception(earlier);
        return -1;
    }
    return 0;
}

static int
close_silently(BufObject *self)
{
    SECTION_BEGIN(self);
    PyObject *execute = close_section(self);
    SECTION_END(self);
    Py_XDECREF(execute);
    return release(self);
}

/* Log `failure` (borrowed), raised by on_error of `subscriber` (borrowed),
   with flowpy._signals.report, as the reference does. Returns -1 with an
   exception set if that failed. */
static int
report_on_error_failure(PyObject *subscriber, PyObject *failure)
{
    PyObject *signals = PyImport_ImportModule("flowpy._signals");
    if (signals == NULL) {
        return -1;
    }
    PyObject *context = PyUnicode_FromFormat("on_error of %R raised (rule 2.13)", subscriber);
    if (context == NULL) {
        Py_DECREF(signals);
        return -1;
    }
    PyObject *r = PyObject_CallMethod(signals, "report", "OO", failure, context);
    Py_DECREF(context);
    Py_DECREF(signals);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* Close and deliver on_error(error), or the pending error, or nothing.
   `error` is borrowed. A failing on_error is dropped unless it is a
   BaseException that is not an Exception (rule 2.13); with `report` (the
   on_error after a raising on_subscribe) an Exception is reported first. */
static int
close_on_error(BufObject *self, PyObject *error, int report)
{
    SECTION_BEGIN(self);
    if (ctl_has(self, CTL_CLOSED)) {
        SECTION_END(self);
        return 0;
    }
    PyObject *old = self->pending_error;
    self->pending_error = NULL;
    if (error == NULL) {
        error = old; /* the reference moves to `error` */
        old = NULL;
    }
    else {
        Py_INCREF(error);
    }
    PyObject *execute = close_section(self);
    PyObject *subscriber = Py_XNewRef(self->subscriber);
    SECTION_END(self);
    Py_XDECREF(old);
    Py_XDECREF(execute);
    PyObject *earlier = NULL;
    if (error != NULL && subscriber != NULL) {
        PyObject *r = PyObject_CallMethodOneArg(subscriber, state_of(self)->str_on_error, error);
        if (r == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                earlier = take_exception();
            }
            else if (!report) {
                PyErr_Clear();
            }
            else {
                PyObject *failure = take_exception();
                if (report_on_error_failure(subscriber, failure) < 0) {
                    chain_exception(failure); /* steals failure, as the reference's `except` block chains it */
                    earlier = take_exception();
                }
                else {
                    Py_DECREF(failure);
                }
            }
        }
        else {
            Py_DECREF(r);
        }
    }
    Py_XDECREF(error);
    Py_XDECREF(subscriber);
    return release_finally(self, earlier);
}

/* The handler, then close with on_error(exc). `exc` is borrowed. */
static int
on_next_failed(BufObject *self, PyObject *subscriber, PyObject *exc)
{
    PyObject *handler = Py_XNewRef(self->handler);
    if (handler != NULL) {
        PyObject *r = PyObject_CallFunctionObjArgs(handler, subscriber, exc, NULL);
        Py_DECREF(handler);
        if (r == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                /* KeyboardInterrupt or the like from the handler: the stream still
                   ends with on_error(exc), whatever that raises; then the
                   handler's exception goes on. */
                PyObject *raised = take_exception();
                PyException_SetContext(raised, Py_NewRef(exc));
                if (close_on_error(self, exc, 0) < 0) {
                    PyErr_Clear();
                }
                restore_exception(raised);
                return -1;
            }
            PyErr_Clear(); /* the handler's own failure is ignored, as in the JDK */
        }
        else {
            Py_DECREF(r);
        }
    }
    return close_on_error(self, exc, 0);
}

/* ALERT was set: a stop or a waiting producer, in the section that popped
   the item. Returns 1 to stop delivering (ALERT stays set), 2 to wake the
   waiting producer (signal_waiter, after the section) and go on, 0 to go on.
   ALERT is cleared in the same section that looks at STOP and WAITING, and
   every writer sets it with them in one section, so none is missed.

   A producer that waits without a timeout is woken only once the buffer is
   down to `wake_level` (half the capacity) or the batch ends (deliver): it
   then refills many slots per wake-up instead of one, where waking it for
   every freed slot costs a sleep and a wake-up per item. Until then ALERT
   stays set, so every pop looks again. The batch ends whenever the consumer
   stops popping (demand used up, buffer empty, STOP), and closing wakes it
   too (release), so the wake-up is late by at most a batch, never lost. */
static inline int
on_alert_locked(BufObject *self)
{
    if (ctl_has(self, CTL_STOP)) {
        return 1;
    }
    int waiting = ctl_has(self, CTL_WAITING);
    if (waiting && self->count > self->wake_level) {
        return 0;
    }
    ctl_clear(self, CTL_ALERT);
    return waiting ? 2 : 0;
}

/* The reference's _hand_over section, in the caller's: the executor to hand
   a task to (a new reference), or NULL: closed, no work pending (a thread
   claimed it), or a task handed over earlier has not started yet and will
   claim the work. */
static inline PyObject *
take_hand_over(BufObject *self)
{
    if (self->execute == NULL || (self->ctl & (CTL_PENDING | CTL_QUEUED)) != CTL_PENDING) {
        return NULL;
    }
    ctl_set(self, CTL_QUEUED);
    return Py_NewRef(self->execute);
}

/* Set RUNNING and PENDING, in the caller's section, and return what
   take_hand_over returns. */
static inline PyObject *
mark_started(BufObject *self)
{
    ctl_set(self, CTL_RUNNING | CTL_PENDING);
    return take_hand_over(self);
}

static PyObject *buf_run(PyObject *self, PyObject *unused);

static PyMethodDef run_def = {
    "_run", buf_run, METH_NOARGS,
    PyDoc_STR("The consumer task: run consume() if this thread claims the pending task."),
};

/* The rest of the reference's _hand_over: hand `execute` (stolen; NULL for
   none) a task, then wake a waiting producer. Returns -1 with the exception
   set if the executor (or the wake-up) raised. */
static int
hand_over(BufObject *self, PyObject *execute)
{
    if (execute != NULL) {
        PyObject *r = NULL;
        PyObject *run = PyCFunction_New(&run_def, (PyObject *)self);
        if (run != NULL) {
            r = PyObject_CallOneArg(execute, run);
            Py_DECREF(run);
        }
        Py_DECREF(execute);
        if (r == NULL) {
            return -1;
        }
        Py_DECREF(r);
    }
    else {
        SECTION_BEGIN(self);
        int closed = self->execute == NULL;
        SECTION_END(self);
        if (closed) {
            return 0;
        }
    }
    if (load_waiting(self)) {
        return signal_waiter(self);
    }
    return 0;
}

/* The refusal of the reference's _start_failed: close, and deliver
   on_error(error) (borrowed) on this thread, after on_subscribe if due, if
   no other thread claimed the pending work. */
static int
refuse(BufObject *self, PyObject *error)
{
    SECTION_BEGIN(self);
    if (!claim_pending_locked(self)) {
        SECTION_END(self);
        return 0;
    }
    PyObject *old = NULL;
    if (!ctl_has(self, CTL_STOP)) {
        old = self->pending_error;
        self->pending_error = Py_NewRef(error);
        ctl_set(self, CTL_STOP);
    }
    SECTION_END(self);
    Py_XDECREF(old);
    return consume(self);
}

/* The reference's _start_signal: hand the executor a task for the pending
   work (`execute`, stolen, from mark_started or take_hand_over); never raises
   an Exception (rules 3.15, 3.16). What the executor raises is the
   reference's _start_failed: an Exception is a refusal; anything else
   (KeyboardInterrupt) may have come before or after the executor queued the
   task, so it is handed over once more, and only if that fails too is it a
   refusal; then the first exception propagates. */
static int
start_signal(BufObject *self, PyObject *execute)
{
    if (hand_over(self, execute) == 0) {
        return 0;
    }
    PyObject *exc = take_exception();
    SECTION_BEGIN(self);
    ctl_clear(self, CTL_QUEUED);
    SECTION_END(self);
    PyObject *error = exc;
    PyObject *again = NULL;
    if (!is_exception(exc)) {
        SECTION_BEGIN(self);
        execute = take_hand_over(self);
        SECTION_END(self);
        if (hand_over(self, execute) == 0) {
            restore_exception(exc);
            return -1;
        }
        SECTION_BEGIN(self);
        ctl_clear(self, CTL_QUEUED);
        SECTION_END(self);
        again = error = take_exception();
    }
    int result = refuse(self, error);
    Py_XDECREF(again);
    if (result < 0) {
        Py_DECREF(exc);
        return -1;
    }
    if (!is_exception(exc)) {
        restore_exception(exc);
        return -1;
    }
    Py_DECREF(exc);
    return 0;
}

/* --- The consumer task ------------------------------------------------------------ */

/* The reference's _deliver: deliver what is due. Returns 1 if the task may
   go idle (consume() runs the exit handshake), 0 once closed, -1 on error. */
static int
deliver(BufObject *self)
{
    /* OPENED is set in the section that finds the subscriber, before
       on_subscribe is called: only the holder of the task sets it, but in a
       section, as the other bits of `ctl` change under other threads. */
    SECTION_BEGIN(self);
    PyObject *subscriber = Py_XNewRef(self->subscriber);
    int opening = subscriber != NULL && !ctl_has(self, CTL_OPENED);
    if (opening) {
        ctl_set(self, CTL_OPENED);
    }
    SECTION_END(self);
    if (subscriber == NULL) {
        return 0;
    }
    module_state *st = state_of(self);
    PyObject *on_next = NULL;
    PyObject *exc = NULL;
    int result = -1;
    if (opening) {
        PyObject *r = PyObject_CallMethodOneArg(subscriber, st->str_on_subscribe, (PyObject *)self);
        if (r == NULL) {
            exc = take_exception();
            if (close_on_error(self, exc, 1) < 0) { /* rule 2.13: reported, as by every flowpy publisher */
                goto done;
            }
            if (!is_exception(exc)) {
                restore_exception(exc);
                exc = NULL;
                goto done;
            }
            result = 0;
            goto done;
        }
        Py_DECREF(r);
    }
    for (;;) {
        /* One section decides what is due; closing, which only the holder of
           the task does, is done in sections of its own. */
        SECTION_BEGIN(self);
        if (ctl_has(self, CTL_STOP)) {
            SECTION_END(self);
            result = close_on_error(self, NULL, 0);
            goto done;
        }
        long long demand = self->demand;
        Py_ssize_t n = self->count;
        if (demand && n) {
            SECTION_END(self);
            if ((long long)n > demand) {
                n = (Py_ssize_t)demand;
            }
            Py_ssize_t i = 0; /* after the loop: the on_next calls that returned */
            if (on_next == NULL) {
                /* Looked up at the first item: a subscriber without one fails
                   as a raising on_next does. */
                on_next = PyObject_GetAttr(subscriber, st->str_on_next);
                if (on_next == NULL) {
                    exc = take_exception();
                    goto failed;
                }
            }
            for (; i < n; i++) {
                /* The reference's popleft() and look at ALERT, in one section. */
                SECTION_BEGIN(self);
                if (!self->count) {
                    SECTION_END(self);
                    break;
                }
                PyObject *item = ring_pop(self);
                int alerted = ctl_has(self, CTL_ALERT) ? on_alert_locked(self) : 0;
                SECTION_END(self);
                if (alerted) {
                    if (alerted == 1) {
                        Py_DECREF(item); /* dropped, as the reference drops it */
                        break;
                    }
                    if (signal_waiter(self) < 0) {
                        exc = take_exception();
                        Py_DECREF(item); /* dropped, as the reference drops it */
                        SECTION_BEGIN(self);
                        self->delivered += i;
                        SECTION_END(self);
                        goto failed;
                    }
                }
                PyObject *args[2] = {NULL, item}; /* args[0]: room for a bound method's self */
                PyObject *r = PyObject_Vectorcall(on_next, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
                if (r == NULL) {
                    exc = take_exception();
                    SECTION_BEGIN(self);
                    self->delivered += i; /* before any Python code runs again */
                    SECTION_END(self);
                    Py_DECREF(item);
                    goto failed;
                }
                Py_DECREF(item);
                Py_DECREF(r);
            }
            /* One section with the demand, as the reference does both under
               its lock, that also ends the batch: a producer still waiting
               for space (see on_alert_locked) is woken. Its wait_for_space
               section came either before this one, and WAITING is seen here,
               or after it, and saw the items this batch popped. */
            SECTION_BEGIN(self);
            self->delivered += i;
            if (demand != MAX_DEMAND) {
                self->demand -= n;
            }
            int waiting = ctl_has(self, CTL_WAITING);
            SECTION_END(self);
            if (waiting && signal_waiter(self) < 0) {
                exc = take_exception();
                goto failed;
            }
            continue;
        }
        if (ctl_has(self, CTL_COMPLETE) && !n) { /* not STOP: the same section looked */
            PyObject *execute = close_section(self);
            SECTION_END(self);
            Py_XDECREF(execute);
            break;
        }
        SECTION_END(self);
        result = 1; /* the exit handshake follows in consume(), outside the context */
        goto done;
    }
    {
        PyObject *r = PyObject_CallMethodNoArgs(subscriber, st->str_on_complete);
        PyObject *earlier = NULL;
        if (r == NULL) {
            if (PyErr_ExceptionMatches(PyExc_Exception)) {
                PyErr_Clear(); /* rule 2.13: a failing terminal signal is dropped */
            }
            else {
                earlier = take_exception();
            }
        }
        else {
            Py_DECREF(r);
        }
        result = release_finally(self, earlier);
        goto done;
    }
failed: /* exc: what on_next (or the wake-up of a waiting producer) raised */
    if (on_next_failed(self, subscriber, exc) < 0) {
        goto done;
    }
    if (!is_exception(exc)) {
        restore_exception(exc);
        exc = NULL;
        goto done;
    }
    result = 0;
done:
    release_keeping_error(exc);
    release_keeping_error(on_next);
    release_keeping_error(subscriber); /* maybe the last reference, after release() */
    return result;
}

/* Exit handshake, one section: clear RUNNING (and `consumer`) unless
   there is work. Returns whether the task may end; then this thread no
   longer holds it, and must not touch its consumer-only fields. The
   reference clears RUNNING and then looks again, because a producer may
   append between its two steps; here no other thread is inside a section
   meanwhile (offer_item appends and looks at RUNNING in one), so the one
   look is final. */
static inline int
exit_handshake(BufObject *self)
{
    SECTION_BEGIN(self);
    if (ctl_has(self, CTL_STOP) || (self->count && self->demand) || (ctl_has(self, CTL_COMPLETE) && !self->count)) {
        SECTION_END(self);
        return 0; /* changed since the delivery pass looked: deliver again */
    }
    ctl_clear(self, CTL_RUNNING);
    ATOMIC_STORE(self->consumer, 0);
    SECTION_END(self);
    return 1;
}

/* Deliver until there is nothing to do, in the subscriber's context if it
   has one: entered once per pass (a pass delivers whole batches), and
   exited in the same section as the exit handshake, so the next task,
   on any thread, can enter it as soon as RUNNING is clear. */
static int
consume(BufObject *self)
{
    ATOMIC_STORE(self->consumer, PyThread_get_thread_ident());
    PyObject *context = Py_XNewRef(self->context); /* kept alive even if a signal drops the subscription */
    int result;
    for (;;) {
        if (context != NULL && PyContext_Enter(context) < 0) {
            result = -1; /* entered elsewhere: cannot happen through the public API */
            break;
        }
        result = deliver(self);
        if (context != NULL) {
            /* What deliver raised stays pending across the exit, which is not
               called with an exception set. */
            PyObject *raised = result < 0 ? take_exception() : NULL;
            if (PyContext_Exit(context) < 0) {
                /* the thread's context was switched and not restored by C code */
                if (raised != NULL) {
                    chain_exception(raised);
                }
                result = -1;
                break;
            }
            if (raised != NULL) {
                restore_exception(raised);
            }
        }
        if (result != 1) {
            break;
        }
        if (exit_handshake(self)) {
            Py_XDECREF(context); /* the handshake cleared `consumer`: another thread may hold the task now */
            return 0;
        }
    }
    /* Closed, or failed: the task is still this thread's (RUNNING stays set). */
    ATOMIC_STORE(self->consumer, 0);
    Py_XDECREF(context);
    return result;
}

/* --- Methods ------------------------------------------------------------------------ */

static PyObject *
buf_run(PyObject *op, PyObject *Py_UNUSED(unused))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    ctl_clear(self, CTL_QUEUED);
    int claimed = claim_pending_locked(self);
    SECTION_END(self);
    if (claimed && consume(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The reference's resume: start the task for items that wait for it. */
static PyObject *
buf_resume(PyObject *op, PyObject *Py_UNUSED(unused))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    int start = self->count && !ctl_has(self, CTL_RUNNING) && self->demand;
    PyObject *execute = start ? mark_started(self) : NULL;
    SECTION_END(self);
    if (start && start_signal(self, execute) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
buf_consume(PyObject *op, PyObject *Py_UNUSED(unused))
{
    if (consume((BufObject *)op) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *buf_signal_error(PyObject *op, PyObject *error);

static PyObject *
buf_request(PyObject *op, PyObject *n)
{
    BufObject *self = (BufObject *)op;
    if (PyLong_CheckExact(n)) {
        int overflow;
        long long value = PyLong_AsLongLongAndOverflow(n, &overflow);
        if (value == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (overflow > 0 || value > 0) {
            SECTION_BEGIN(self);
            if (ctl_has(self, CTL_CLOSED)) {
                SECTION_END(self);
                Py_RETURN_NONE;
            }
            if (overflow > 0 || value >= MAX_DEMAND - self->demand) {
                self->demand = MAX_DEMAND;
            }
            else {
                self->demand += value;
            }
            if (ctl_has(self, CTL_RUNNING)) {
                SECTION_END(self);
                Py_RETURN_NONE;
            }
            PyObject *execute = mark_started(self);
            SECTION_END(self);
            if (start_signal(self, execute) < 0) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
    }
    /* Not a positive int: the shared check says which error, if any. */
    PyObject *demand_module = PyImport_ImportModule("flowpy._demand");
    if (demand_module == NULL) {
        return NULL;
    }
    PyObject *error = PyObject_CallMethod(demand_module, "check_request", "O", n);
    Py_DECREF(demand_module);
    if (error == NULL) {
        return NULL;
    }
    PyObject *r;
    if (error != Py_None) {
        r = buf_signal_error(op, error);
    }
    else { /* an int subclass other than bool */
        PyObject *exact = PyNumber_Long(n);
        if (exact == NULL) {
            Py_DECREF(error);
            return NULL;
        }
        r = buf_request(op, exact);
        Py_DECREF(exact);
    }
    Py_DECREF(error);
    return r;
}

/* request(n) with n given by position or by name, as Subscription.request
   takes it; the common call, one positional argument, goes straight through. */
static PyObject *
buf_request_method(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs == 1 && nkw == 0) {
        return buf_request(op, args[0]);
    }
    if (nargs == 0 && nkw == 1) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, 0);
        if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "n") == 0) {
            return buf_request(op, args[0]);
        }
        PyErr_Format(PyExc_TypeError, "request() got an unexpected keyword argument %R", name);
        return NULL;
    }
    PyErr_Format(PyExc_TypeError, "request() takes exactly one argument (%zd given)", nargs + nkw);
    return NULL;
}

static PyObject *
buf_signal_error(PyObject *op, PyObject *error)
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    if (ctl_has(self, CTL_CLOSED)) {
        SECTION_END(self);
        Py_RETURN_NONE;
    }
    PyObject *old = NULL;
    if (error != Py_None) {
        old = self->pending_error;
        self->pending_error = Py_NewRef(error);
    }
    ctl_set(self, CTL_STOP | CTL_ALERT);
    PyObject *execute = NULL;
    int start = !ctl_has(self, CTL_RUNNING);
    if (start) {
        execute = mark_started(self);
    }
    SECTION_END(self);
    Py_XDECREF(old);
    if (start && start_signal(self, execute) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
buf_cancel(PyObject *op, PyObject *Py_UNUSED(unused))
{
    return buf_signal_error(op, Py_None);
}

static PyObject *
buf_signal_subscribe(PyObject *op, PyObject *Py_UNUSED(unused))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    PyObject *execute = mark_started(self);
    SECTION_END(self);
    if (execute == NULL) {
        PyErr_SetString(PyExc_AssertionError, "signal_subscribe is the first signal");
        return NULL;
    }
    PyObject *r = NULL;
    PyObject *run = PyCFunction_New(&run_def, op);
    if (run != NULL) {
        r = PyObject_CallOneArg(execute, run);
    }
    PyObject *exc = r == NULL ? take_exception() : NULL;
    Py_XDECREF(run);
    Py_DECREF(execute);
    if (r == NULL) {
        /* Refused, or interrupted: if no task started, nothing was signalled
           and it closes silently; else on_error(exc) follows on_subscribe. */
        int failed;
        if (claim_pending(self)) {
            failed = close_silently(self);
        }
        else {
            PyObject *done = buf_signal_error(op, exc);
            failed = done == NULL;
            Py_XDECREF(done);
        }
        if (failed) {
            chain_exception(exc);
        }
        else {
            restore_exception(exc);
        }
        return NULL;
    }
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static PyObject *
buf_signal_complete(PyObject *op, PyObject *Py_UNUSED(unused))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    if (ctl_has(self, CTL_CLOSED | CTL_COMPLETE)) {
        SECTION_END(self);
        Py_RETURN_NONE;
    }
    ctl_set(self, CTL_COMPLETE);
    if (ctl_has(self, CTL_RUNNING)) {
        SECTION_END(self);
        Py_RETURN_NONE;
    }
    PyObject *execute = mark_started(self);
    SECTION_END(self);
    if (start_signal(self, execute) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Buffer `item`: the reference's offer. Returns the items now buffered, 0 if
   full, -1 if closed, -2 with an exception set. The caller holds the
   publisher's lock; starting the consumer task may call the executor. */
static Py_ssize_t
offer_item(BufObject *self, PyObject *item)
{
    /* One section appends and looks at RUNNING: see exit_handshake. */
    SECTION_BEGIN(self);
    Py_ssize_t n = self->count;
    if (n >= self->capacity) {
        int closed = ctl_has(self, CTL_CLOSED);
        SECTION_END(self);
        return closed ? -1 : 0;
    }
    if (ring_reserve(self) < 0) {
        SECTION_END(self);
        PyErr_NoMemory();
        return -2;
    }
    self->ring[(self->head + n) & (self->size - 1)] = Py_NewRef(item);
    self->count = n + 1;
    int start = !ctl_has(self, CTL_RUNNING) && self->demand;
    PyObject *execute = start ? mark_started(self) : NULL;
    SECTION_END(self);
    if (start && start_signal(self, execute) < 0) {
        return -2;
    }
    return n + 1;
}

#ifndef Py_GIL_DISABLED
/* Whether offer_item would buffer `item` without calling any Python code:
   there is room and no consumer task is due to start. For the lock-free
   fast path of submit, which exists only with the GIL, and is one section
   (of every subscription it reads) as a section is with the GIL. */
static inline int
offer_is_plain(BufObject *self)
{
    return self->count < self->capacity && (ctl_has(self, CTL_RUNNING) || !self->demand);
}
#endif

/* The producer's fast path; the caller holds the publisher's lock. */
static PyObject *
buf_offer(PyObject *op, PyObject *item)
{
    Py_ssize_t status = offer_item((BufObject *)op, item);
    return status == -2 ? NULL : PyLong_FromSsize_t(status);
}

/* Buffer items[start:stop] of a list (none is None) if all fit: the batch
   form of offer_item, with its results (-2: an exception is set). The caller
   holds the publisher's lock and checked the bounds. */
static Py_ssize_t
extend_items(BufObject *self, PyObject *items, Py_ssize_t start, Py_ssize_t stop)
{
    Py_ssize_t k = stop - start;
    SECTION_BEGIN(self);
    Py_ssize_t n = self->count;
    if (k > self->capacity - n) {
        int closed = ctl_has(self, CTL_CLOSED);
        SECTION_END(self);
        return closed ? -1 : 0;
    }
    if (ring_grow(self, n + k) < 0) {
        SECTION_END(self);
        PyErr_NoMemory();
        return -2;
    }
    Py_ssize_t mask = self->size - 1;
    for (Py_ssize_t i = 0; i < k; i++) {
        self->ring[(self->head + n + i) & mask] = Py_NewRef(PyList_GET_ITEM(items, start + i));
    }
    self->count = n + k;
    int started = !ctl_has(self, CTL_RUNNING) && self->demand;
    PyObject *execute = started ? mark_started(self) : NULL;
    SECTION_END(self);
    if (started && start_signal(self, execute) < 0) {
        return -2;
    }
    return n + k;
}

/* Buffer every item of a list (none is None) if all fit: the batch form of
   offer, for submit_many. The caller holds the publisher's lock. */
static PyObject *
buf_extend(PyObject *op, PyObject *items)
{
    if (!PyList_CheckExact(items)) {
        PyErr_Format(PyExc_TypeError, "items must be a list, got %R", items);
        return NULL;
    }
    Py_ssize_t status = extend_items((BufObject *)op, items, 0, PyList_GET_SIZE(items));
    return status == -2 ? NULL : PyLong_FromSsize_t(status);
}

static inline Py_ssize_t
free_slots(BufObject *self)
{
    SECTION_BEGIN(self);
    Py_ssize_t free = self->capacity - self->count;
    SECTION_END(self);
    return free > 0 ? free : 0;
}

static PyObject *
buf_free_slots(PyObject *op, PyObject *Py_UNUSED(unused))
{
    return PyLong_FromSsize_t(free_slots((BufObject *)op));
}

/* In the caller's section. */
static inline int
has_space_locked(BufObject *self)
{
    return self->count < self->capacity || ctl_has(self, CTL_CLOSED);
}

/* has_space_locked in a section of its own. */
static inline int
has_space(BufObject *self)
{
    SECTION_BEGIN(self);
    int space = has_space_locked(self);
    SECTION_END(self);
    return space;
}

static PyObject *
buf_has_space(PyObject *op, PyObject *Py_UNUSED(unused))
{
    return PyBool_FromLong(has_space((BufObject *)op));
}

static PyObject *
buf_claim_pending(PyObject *op, PyObject *Py_UNUSED(unused))
{
    return PyBool_FromLong(claim_pending((BufObject *)op));
}

static PyObject *
buf_wait_for_space(PyObject *op, PyObject *timeout)
{
    BufObject *self = (BufObject *)op;
    module_state *st = state_of(self);
    double delay = st->claim_delay;
    if (delay == 0.0 && claim_pending(self)) {
        if (consume(self) < 0) {
            return NULL;
        }
        Py_RETURN_TRUE;
    }
    /* One section sets the flags and looks, as the consumer pops and looks
       at ALERT in one (see deliver). A wait with a timeout is woken by the
       first pop, as in the reference; one without, at half the capacity
       (see on_alert_locked). With two waiters, the earlier wake-up wins. */
    SECTION_BEGIN(self);
    Py_ssize_t level = timeout == Py_None ? self->capacity / 2 : self->capacity - 1;
    if (!ctl_has(self, CTL_WAITING) || level > self->wake_level) {
        self->wake_level = level;
    }
    ctl_set(self, CTL_WAITING | CTL_ALERT);
    int pending = ctl_has(self, CTL_PENDING);
    int ready = has_space_locked(self) || (pending && delay == 0.0);
    if (ready) {
        ctl_clear(self, CTL_WAITING);
    }
    SECTION_END(self);
    if (ready) {
        Py_RETURN_TRUE;
    }
    if (!pending) {
        return PyObject_CallMethodOneArg(self->space, st->str_wait, timeout);
    }
    /* The GIL is off: the executor has `delay` seconds to start the task on
       another core before this producer runs it (see the reference). */
    if (timeout != Py_None) {
        double given = PyFloat_AsDouble(timeout);
        if (given == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
        if (given < delay) {
            delay = given;
        }
    }
    PyObject *seconds = PyFloat_FromDouble(delay);
    if (seconds == NULL) {
        return NULL;
    }
    PyObject *woken = PyObject_CallMethodOneArg(self->space, st->str_wait, seconds);
    Py_DECREF(seconds);
    if (woken == NULL) {
        return NULL;
    }
    if (claim_pending(self)) {
        Py_DECREF(woken);
        if (consume(self) < 0) {
            return NULL;
        }
        Py_RETURN_TRUE;
    }
    return woken;
}

static PyObject *
buf_stop_waiting(PyObject *op, PyObject *Py_UNUSED(unused))
{
    clear_waiting((BufObject *)op);
    Py_RETURN_NONE;
}

static PyObject *
buf_lag(PyObject *op, PyObject *Py_UNUSED(unused))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    Py_ssize_t count = self->count;
    SECTION_END(self);
    return PyLong_FromSsize_t(count);
}

static PyObject *
buf_estimate_demand(PyObject *op, PyObject *Py_UNUSED(unused))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    long long estimate = self->demand - (long long)self->count;
    SECTION_END(self);
    return PyLong_FromLongLong(estimate);
}

static PyObject *
buf_count_drop(PyObject *op, PyObject *Py_UNUSED(unused))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    self->dropped++;
    SECTION_END(self);
    Py_RETURN_NONE;
}

/* (buffered, demand, delivered, dropped), read in one section. */
static PyObject *
buf_readings(PyObject *op, PyObject *Py_UNUSED(unused))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    Py_ssize_t count = self->count;
    long long demand = self->demand, delivered = self->delivered, dropped = self->dropped;
    SECTION_END(self);
    return Py_BuildValue("(nLLL)", count, demand, delivered, dropped);
}

static PyObject *
buf_has_task(PyObject *op, PyObject *Py_UNUSED(unused))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    int task = (self->ctl & (CTL_RUNNING | CTL_CLOSED)) == CTL_RUNNING;
    SECTION_END(self);
    return PyBool_FromLong(task);
}

/* Reads `consumer` without a section: only this thread can have stored its own ident there. */
static PyObject *
buf_delivering_here(PyObject *op, PyObject *Py_UNUSED(unused))
{
    BufObject *self = (BufObject *)op;
    unsigned long consumer = ATOMIC_LOAD(self->consumer);
    return PyBool_FromLong(consumer != 0 && consumer == PyThread_get_thread_ident());
}

static PyObject *
buf_get_is_closed(PyObject *op, void *Py_UNUSED(closure))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    int closed = ctl_has(self, CTL_CLOSED);
    SECTION_END(self);
    return PyBool_FromLong(closed);
}

/* `ctl`, read in a section: for tests, which compare it with the reference's. */
static PyObject *
buf_get_ctl(PyObject *op, void *Py_UNUSED(closure))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    unsigned int ctl = self->ctl;
    SECTION_END(self);
    return PyLong_FromUnsignedLong(ctl);
}

static PyObject *
buf_get_subscriber(PyObject *op, void *Py_UNUSED(closure))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    PyObject *subscriber = Py_XNewRef(self->subscriber);
    SECTION_END(self);
    return subscriber != NULL ? subscriber : Py_NewRef(Py_None);
}

#ifdef Py_GIL_DISABLED
/* The counters, read in a section (with the GIL they are plain members). */
static PyObject *
buf_get_delivered(PyObject *op, void *Py_UNUSED(closure))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    long long delivered = self->delivered;
    SECTION_END(self);
    return PyLong_FromLongLong(delivered);
}

static PyObject *
buf_get_dropped(PyObject *op, void *Py_UNUSED(closure))
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    long long dropped = self->dropped;
    SECTION_END(self);
    return PyLong_FromLongLong(dropped);
}
#endif

static PyObject *
buf_repr(PyObject *op)
{
    BufObject *self = (BufObject *)op;
    SECTION_BEGIN(self);
    PyObject *subscriber = Py_NewRef(self->subscriber != NULL ? self->subscriber : Py_None);
    int closed = ctl_has(self, CTL_CLOSED);
    long long demand = self->demand;
    Py_ssize_t count = self->count;
    SECTION_END(self);
    PyObject *r;
    if (closed) {
        r = PyUnicode_FromFormat("<BufferedSubscription closed subscriber=%R>", subscriber);
    }
    else {
        r = PyUnicode_FromFormat("<BufferedSubscription demand=%lld buffered=%zd subscriber=%R>", demand, count,
                                 subscriber);
    }
    Py_DECREF(subscriber);
    return r;
}

/* --- Life cycle ------------------------------------------------------------------------ */

static PyObject *
buf_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"subscriber", "execute", "capacity", "handler", "space", "context", NULL};
    PyObject *subscriber, *execute, *handler, *space, *context = Py_None;
    Py_ssize_t capacity;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOnOO|O:BufferedSubscription", keywords,
                                     &subscriber, &execute, &capacity, &handler, &space, &context)) {
        return NULL;
    }
    if (context != Py_None && !PyContext_CheckExact(context)) {
        PyErr_Format(PyExc_TypeError, "BufferedSubscription context must be a contextvars.Context or None, got %R",
                     context);
        return NULL;
    }
    BufObject *self = (BufObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->subscriber = Py_NewRef(subscriber);
    self->execute = Py_NewRef(execute);
    self->handler = handler == Py_None ? NULL : Py_NewRef(handler);
    self->space = Py_NewRef(space);
    self->context = context == Py_None ? NULL : Py_NewRef(context);
    self->capacity = capacity;
    return (PyObject *)self;
}

/* Reads the ring without a section: without the GIL the collector runs with
   every other thread stopped, and none stops inside a section (no section
   waits for anything but another section's end). */
static int
buf_traverse(PyObject *op, visitproc visit, void *arg)
{
    BufObject *self = (BufObject *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->subscriber);
    Py_VISIT(self->handler);
    Py_VISIT(self->space);
    Py_VISIT(self->context);
    Py_VISIT(self->execute);
    Py_VISIT(self->pending_error);
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Py_VISIT(self->ring[(self->head + i) & (self->size - 1)]);
    }
    return 0;
}

static int
buf_clear(PyObject *op)
{
    BufObject *self = (BufObject *)op;
    ring_clear(self);
    Py_CLEAR(self->subscriber);
    Py_CLEAR(self->handler);
    Py_CLEAR(self->space);
    Py_CLEAR(self->context);
    Py_CLEAR(self->execute);
    Py_CLEAR(self->pending_error);
    return 0;
}

static void
buf_dealloc(PyObject *op)
{
    BufObject *self = (BufObject *)op;
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs(op);
    }
    (void)buf_clear(op);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMethodDef buf_methods[] = {
    {"request", (PyCFunction)(void (*)(void))buf_request_method, METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("request($self, /, n)\n--\n\n"
               "Add n to the demand and start delivery (rules 3.8, 3.9, 3.17); never raises (3.16).")},
    {"cancel", buf_cancel, METH_NOARGS,
     PyDoc_STR("cancel($self, /)\n--\n\nStop delivery and drop buffered items; idempotent (rules 3.5, 3.7, 3.12).")},
    {"signal_subscribe", buf_signal_subscribe, METH_NOARGS,
     PyDoc_STR("signal_subscribe($self, /)\n--\n\n"
               "Start the task that delivers on_subscribe; an executor's refusal propagates.")},
    {"signal_complete", buf_signal_complete, METH_NOARGS,
     PyDoc_STR("signal_complete($self, /)\n--\n\n"
               "Deliver on_complete after the buffered items, as far as demand allows.")},
    {"signal_error", buf_signal_error, METH_O,
     PyDoc_STR("signal_error($self, error, /)\n--\n\n"
               "Drop buffered items and deliver on_error(error), or close silently if None.")},
    {"offer", buf_offer, METH_O,
     PyDoc_STR("offer($self, item, /)\n--\n\nBuffer item; return the items now buffered, 0 if full, -1 if closed.")},
    {"extend", buf_extend, METH_O,
     PyDoc_STR("extend($self, items, /)\n--\n\n"
               "Buffer all items of a list if they fit; return the items now buffered, 0 if not, -1 if closed.")},
    {"free_slots", buf_free_slots, METH_NOARGS,
     PyDoc_STR("free_slots($self, /)\n--\n\nHow many items offer would take now; 0 if full or closed.")},
    {"has_space", buf_has_space, METH_NOARGS,
     PyDoc_STR("has_space($self, /)\n--\n\nWhether offer would not return 0: there is room, or it is closed.")},
    {"claim_pending", buf_claim_pending, METH_NOARGS,
     PyDoc_STR("claim_pending($self, /)\n--\n\n"
               "Take over a task that the executor has not started; then run consume().")},
    {"wait_for_space", buf_wait_for_space, METH_O,
     PyDoc_STR("wait_for_space($self, timeout, /)\n--\n\n"
               "Block until there is space, or closure, or timeout seconds pass.")},
    {"stop_waiting", buf_stop_waiting, METH_NOARGS,
     PyDoc_STR("stop_waiting($self, /)\n--\n\nForget that a producer waits for space; the publisher's lock is held.")},
    {"lag", buf_lag, METH_NOARGS,
     PyDoc_STR("lag($self, /)\n--\n\nItems buffered and not yet taken (a racy estimate, for monitoring).")},
    {"estimate_demand", buf_estimate_demand, METH_NOARGS,
     PyDoc_STR("estimate_demand($self, /)\n--\n\n"
               "Outstanding demand less buffered items (a racy estimate, for monitoring).")},
    {"count_drop", buf_count_drop, METH_NOARGS,
     PyDoc_STR("count_drop($self, /)\n--\n\n"
               "Count one item dropped for this subscriber; the caller holds the publisher's lock.")},
    {"readings", buf_readings, METH_NOARGS,
     PyDoc_STR("readings($self, /)\n--\n\n(buffered, demand, delivered, dropped), read together, for monitoring.")},
    {"has_task", buf_has_task, METH_NOARGS,
     PyDoc_STR("has_task($self, /)\n--\n\n"
               "Whether a consumer task is queued or running (a racy reading, for monitoring).")},
    {"resume", buf_resume, METH_NOARGS,
     PyDoc_STR("resume($self, /)\n--\n\n"
               "Start the consumer task if items and demand wait for it and none is under way.")},
    {"consume", buf_consume, METH_NOARGS,
     PyDoc_STR("consume($self, /)\n--\n\n"
               "Deliver signals until there is nothing to do; called by the one thread holding the task.")},
    {"delivering_here", buf_delivering_here, METH_NOARGS,
     PyDoc_STR("delivering_here($self, /)\n--\n\n"
               "Whether this thread is inside consume(), that is, inside one of the subscriber's methods.")},
    {"_run", buf_run, METH_NOARGS,
     PyDoc_STR("_run($self, /)\n--\n\nThe consumer task: run consume() if this thread claims the pending task.")},
    {"__class_getitem__", Py_GenericAlias, METH_O | METH_CLASS,
     PyDoc_STR("See PEP 585.")},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef buf_getset[] = {
    {"is_closed", buf_get_is_closed, NULL,
     PyDoc_STR("Whether a terminal signal was delivered or the subscription was cancelled."), NULL},
    {"subscriber", buf_get_subscriber, NULL,
     PyDoc_STR("The subscriber; None once the subscription closed (rule 3.13)."), NULL},
    {"_ctl", buf_get_ctl, NULL,
     PyDoc_STR("The state flags: an int of the bits in CTL_BITS (a racy reading, for tests)."), NULL},
#ifdef Py_GIL_DISABLED
    {"delivered", buf_get_delivered, NULL,
     PyDoc_STR("on_next calls that returned normally, counted once per drained batch."), NULL},
    {"dropped", buf_get_dropped, NULL,
     PyDoc_STR("Items dropped for this subscriber because its buffer was full."), NULL},
#endif
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef buf_members[] = {
    {"__weaklistoffset__", Py_T_PYSSIZET, offsetof(BufObject, weakreflist), Py_READONLY, NULL},
#ifndef Py_GIL_DISABLED
    {"delivered", Py_T_LONGLONG, offsetof(BufObject, delivered), Py_READONLY,
     PyDoc_STR("on_next calls that returned normally, counted once per drained batch.")},
    {"dropped", Py_T_LONGLONG, offsetof(BufObject, dropped), Py_READONLY,
     PyDoc_STR("Items dropped for this subscriber because its buffer was full.")},
#endif
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(buf_doc,
"BufferedSubscription(subscriber, execute, capacity, handler, space, context=None)\n"
"--\n\n"
"A bounded buffer of items for one subscriber, drained by one task at a time.\n\n"
"The compiled twin of flowpy._buffered.BufferedSubscription, with the same\n"
"behaviour. request and cancel may be called from any thread; offer only by\n"
"the producer holding the publisher's lock. Subscriber methods run only in\n"
"the consumer task, never inside one of this object's state changes.");

static PyType_Slot buf_slots[] = {
    {Py_tp_doc, (void *)buf_doc},
    {Py_tp_new, buf_new},
    {Py_tp_dealloc, buf_dealloc},
    {Py_tp_traverse, buf_traverse},
    {Py_tp_clear, buf_clear},
    {Py_tp_repr, buf_repr},
    {Py_tp_methods, buf_methods},
    {Py_tp_getset, buf_getset},
    {Py_tp_members, buf_members},
    {0, NULL},
};

static PyType_Spec buf_spec = {
    .name = "flowpy._cbuffered.BufferedSubscription",
    .basicsize = sizeof(BufObject),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC
#ifdef Py_TPFLAGS_IMMUTABLETYPE
             | Py_TPFLAGS_IMMUTABLETYPE
#endif
    ,
    .slots = buf_slots,
};

/* The bits of `ctl` by the reference's names: the module's int constants
   RUNNING, PENDING, ... and its dict CTL_BITS (name -> bit). */
static const struct {
    const char *name;
    unsigned int bit;
} ctl_bits[] = {
    {"RUNNING", CTL_RUNNING}, {"PENDING", CTL_PENDING}, {"QUEUED", CTL_QUEUED},
    {"COMPLETE", CTL_COMPLETE}, {"STOP", CTL_STOP}, {"CLOSED", CTL_CLOSED},
    {"OPENED", CTL_OPENED}, {"ALERT", CTL_ALERT}, {"WAITING", CTL_WAITING},
};

static int
add_ctl_bits(PyObject *module)
{
    PyObject *bits = PyDict_New();
    if (bits == NULL) {
        return -1;
    }
    for (size_t i = 0; i < sizeof ctl_bits / sizeof ctl_bits[0]; i++) {
        PyObject *bit = PyLong_FromUnsignedLong(ctl_bits[i].bit);
        if (bit == NULL || PyDict_SetItemString(bits, ctl_bits[i].name, bit) < 0
            || PyModule_AddObjectRef(module, ctl_bits[i].name, bit) < 0) {
            Py_XDECREF(bit);
            Py_DECREF(bits);
            return -1;
        }
        Py_DECREF(bit);
    }
    int added = PyModule_AddObjectRef(module, "CTL_BITS", bits);
    Py_DECREF(bits);
    return added;
}

/* --- The producer lock ------------------------------------------------------------------- */

/*
 * A re-entrant lock that threading.Condition accepts (acquire, release, the
 * context manager, _is_owned, _release_save, _acquire_restore): the design
 * of threading.RLock. `mutex` is held while the lock is owned; `owner` and
 * `count` are written only by the thread holding `mutex` (just after taking
 * it, or just before giving it up), and read by any thread, which compares
 * `owner` with its own ident. A thread finds its own ident there only if it
 * stored it itself, and its own stores are the ones it sees, so relaxed
 * atomics (ATOMIC_LOAD/ATOMIC_STORE) suffice: `count` is read only after
 * `owner` was found to be this thread's.
 *
 * With the GIL, the lock exists so that the compiled submit can read
 * `owner`: a producer that finds the lock free (or its own) publishes an
 * item that needs no Python code in one section, which no other thread can
 * enter, without touching the mutex. A thread blocked on the mutex may hold
 * it before it has the GIL to set `owner`; that thread runs nothing until
 * then, so a section that sees `owner == 0` meanwhile still comes before its
 * turn. Without the GIL there is no such fast path: submit takes the mutex.
 */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock mutex;
    unsigned long owner; /* ident of the owning thread; 0 if free; ATOMIC_LOAD/ATOMIC_STORE */
    unsigned long count; /* how often the owner took it; 0 if free; ATOMIC_LOAD/ATOMIC_STORE */
    PyObject *weakreflist;
} LockObject;

static void lock_dealloc(PyObject *op);

/* Whether `op` is a ProducerLock (of any instance of this module). */
static inline int
is_producer_lock(PyObject *op)
{
    return Py_TYPE(op)->tp_dealloc == lock_dealloc;
}

/* This thread's ownership, for the owner: the mutex is held. */
static inline void
lock_own(LockObject *self, unsigned long me, unsigned long count)
{
    ATOMIC_STORE(self->count, count);
    ATOMIC_STORE(self->owner, me);
}

/* Whether this thread (`me`) owns the lock. */
static inline int
lock_owned_by(LockObject *self, unsigned long me)
{
    return ATOMIC_LOAD(self->owner) == me && ATOMIC_LOAD(self->count) > 0;
}

/* Take the lock if this thread owns it or the mutex is free now; 1 if taken,
   0 if not, -1 (OverflowError) if the count would overflow. One section. */
static int
lock_try_enter(LockObject *self, unsigned long me)
{
    if (ATOMIC_LOAD(self->owner) == me) {
        unsigned long count = ATOMIC_LOAD(self->count);
        if (count == ULONG_MAX) {
            PyErr_SetString(PyExc_OverflowError, "ProducerLock count overflowed");
            return -1;
        }
        ATOMIC_STORE(self->count, count + 1);
        return 1;
    }
    if (PyThread_acquire_lock(self->mutex, NOWAIT_LOCK)) {
        lock_own(self, me, 1);
        return 1;
    }
    return 0;
}

/* Wait for the mutex with the GIL released. With `interruptible`, signal
   handlers run between tries and what they raise is returned as -1;
   otherwise the wait goes on through signals. Returns 0 once it is held. */
static int
mutex_wait(PyThread_type_lock mutex, int interruptible)
{
    for (;;) {
        PyLockStatus r;
        Py_BEGIN_ALLOW_THREADS
        r = PyThread_acquire_lock_timed(mutex, -1, interruptible);
        Py_END_ALLOW_THREADS
        if (r == PY_LOCK_ACQUIRED) {
            return 0;
        }
        if (r == PY_LOCK_INTR && Py_MakePendingCalls() < 0) {
            return -1;
        }
    }
}

/* Give the lock up once; the caller owns it. One section. */
static inline void
lock_exit(LockObject *self)
{
    unsigned long count = ATOMIC_LOAD(self->count) - 1;
    if (count == 0) {
        lock_own(self, 0, 0);
        PyThread_release_lock(self->mutex);
    }
    else {
        ATOMIC_STORE(self->count, count);
    }
}

static PyObject *
lock_acquire(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    LockObject *self = (LockObject *)op;
    PyObject *blocking_arg = nargs > 0 ? args[0] : NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs + nkw > 1) {
        PyErr_Format(PyExc_TypeError, "acquire() takes at most 1 argument, got %zd", nargs + nkw);
        return NULL;
    }
    if (nkw == 1) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, 0);
        if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, "blocking") != 0) {
            PyErr_Format(PyExc_TypeError, "acquire() got an unexpected keyword argument %R", name);
            return NULL;
        }
        blocking_arg = args[0];
    }
    int blocking = 1;
    if (blocking_arg != NULL) {
        blocking = PyObject_IsTrue(blocking_arg);
        if (blocking < 0) {
            return NULL;
        }
    }
    unsigned long me = PyThread_get_thread_ident();
    int taken = lock_try_enter(self, me);
    if (taken < 0) {
        return NULL;
    }
    if (taken) {
        Py_RETURN_TRUE;
    }
    if (!blocking) {
        Py_RETURN_FALSE;
    }
    if (mutex_wait(self->mutex, 1) < 0) {
        return NULL;
    }
    lock_own(self, me, 1);
    Py_RETURN_TRUE;
}

static PyObject *
lock_enter(PyObject *op, PyObject *Py_UNUSED(unused))
{
    return lock_acquire(op, NULL, 0, NULL);
}

static PyObject *
lock_release(PyObject *op, PyObject *Py_UNUSED(unused))
{
    LockObject *self = (LockObject *)op;
    if (!lock_owned_by(self, PyThread_get_thread_ident())) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return NULL;
    }
    lock_exit(self);
    Py_RETURN_NONE;
}

static PyObject *
lock_exit_method(PyObject *op, PyObject *Py_UNUSED(args))
{
    return lock_release(op, NULL);
}

static PyObject *
lock_is_owned(PyObject *op, PyObject *Py_UNUSED(unused))
{
    return PyBool_FromLong(lock_owned_by((LockObject *)op, PyThread_get_thread_ident()));
}

/* For threading.Condition.wait: give the lock up entirely; return the state to restore. */
static PyObject *
lock_release_save(PyObject *op, PyObject *Py_UNUSED(unused))
{
    LockObject *self = (LockObject *)op;
    unsigned long me = PyThread_get_thread_ident();
    if (!lock_owned_by(self, me)) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return NULL;
    }
    PyObject *state = Py_BuildValue("(kk)", ATOMIC_LOAD(self->count), me);
    if (state == NULL) {
        return NULL;
    }
    lock_own(self, 0, 0);
    PyThread_release_lock(self->mutex);
    return state;
}

/* For threading.Condition.wait: take the lock again, through signals, and restore the state. */
static PyObject *
lock_acquire_restore(PyObject *op, PyObject *state)
{
    LockObject *self = (LockObject *)op;
    unsigned long count, owner;
    if (!PyTuple_Check(state)) {
        PyErr_Format(PyExc_TypeError, "_acquire_restore() state must be a (count, owner) tuple, got %R", state);
        return NULL;
    }
    if (!PyArg_ParseTuple(state, "kk:_acquire_restore", &count, &owner)) {
        return NULL;
    }
    if (!PyThread_acquire_lock(self->mutex, NOWAIT_LOCK)) {
        (void)mutex_wait(self->mutex, 0);
    }
    lock_own(self, owner, count);
    Py_RETURN_NONE;
}

/* After os.fork(), in the child: make the lock free and unowned, as
   threading.RLock._at_fork_reinit does. The thread that held it at the fork
   does not exist in the child, and the old mutex may have been in the middle
   of an operation of another thread, so it is neither released nor freed:
   it is left allocated on purpose (CPython's own locks do the same). */
static PyObject *
lock_at_fork_reinit(PyObject *op, PyObject *Py_UNUSED(unused))
{
    LockObject *self = (LockObject *)op;
    PyThread_type_lock mutex = PyThread_allocate_lock();
    if (mutex == NULL) {
        PyErr_SetString(PyExc_MemoryError, "cannot allocate lock");
        return NULL;
    }
    self->mutex = mutex;
    lock_own(self, 0, 0);
    Py_RETURN_NONE;
}

static PyObject *
lock_repr(PyObject *op)
{
    LockObject *self = (LockObject *)op;
    unsigned long owner = ATOMIC_LOAD(self->owner), count = ATOMIC_LOAD(self->count);
    return PyUnicode_FromFormat("<ProducerLock %s owner=%lu count=%lu>", count ? "locked" : "unlocked", owner, count);
}

static PyObject *
lock_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "ProducerLock() takes no arguments");
        return NULL;
    }
    LockObject *self = (LockObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->mutex = PyThread_allocate_lock();
    if (self->mutex == NULL) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate lock");
        return NULL;
    }
    return (PyObject *)self;
}

static void
lock_dealloc(PyObject *op)
{
    LockObject *self = (LockObject *)op;
    PyTypeObject *type = Py_TYPE(op);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs(op);
    }
    if (self->mutex != NULL) {
        if (ATOMIC_LOAD(self->count) > 0) {
            PyThread_release_lock(self->mutex);
        }
        PyThread_free_lock(self->mutex);
    }
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMethodDef lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))lock_acquire, METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("acquire($self, /, blocking=True)\n--\n\nTake the lock, again if this thread holds it; "
               "without blocking, return False if another thread holds it.")},
    {"release", lock_release, METH_NOARGS,
     PyDoc_STR("release($self, /)\n--\n\nGive the lock up once; RuntimeError if this thread does not hold it.")},
    {"__enter__", lock_enter, METH_NOARGS, PyDoc_STR("__enter__($self, /)\n--\n\nacquire()")},
    {"__exit__", lock_exit_method, METH_VARARGS, PyDoc_STR("__exit__($self, /, *args)\n--\n\nrelease()")},
    {"_is_owned", lock_is_owned, METH_NOARGS, PyDoc_STR("_is_owned($self, /)\n--\n\n"
                                                        "Whether this thread holds the lock.")},
    {"_release_save", lock_release_save, METH_NOARGS,
     PyDoc_STR("_release_save($self, /)\n--\n\n"
               "For threading.Condition: give the lock up entirely; return the state to restore.")},
    {"_acquire_restore", lock_acquire_restore, METH_O,
     PyDoc_STR("_acquire_restore($self, state, /)\n--\n\n"
               "For threading.Condition: take the lock again and restore a saved state.")},
    {"_at_fork_reinit", lock_at_fork_reinit, METH_NOARGS,
     PyDoc_STR("_at_fork_reinit($self, /)\n--\n\n"
               "After os.fork(), in the child: make the lock free and unowned, as threading.RLock does.")},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef lock_members[] = {
    {"__weaklistoffset__", Py_T_PYSSIZET, offsetof(LockObject, weakreflist), Py_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(lock_doc,
"ProducerLock()\n"
"--\n\n"
"The re-entrant lock that serialises a SubmissionPublisher's producers.\n\n"
"Behaves as threading.RLock for acquire(blocking=True), release(), the\n"
"with-statement and threading.Condition; the compiled submit reads its owner\n"
"to publish without taking it when no Python code needs to run.");

static PyType_Slot lock_slots[] = {
    {Py_tp_doc, (void *)lock_doc},
    {Py_tp_new, lock_new},
    {Py_tp_dealloc, lock_dealloc},
    {Py_tp_repr, lock_repr},
    {Py_tp_methods, lock_methods},
    {Py_tp_members, lock_members},
    {0, NULL},
};

static PyType_Spec lock_spec = {
    .name = "flowpy._cbuffered.ProducerLock",
    .basicsize = sizeof(LockObject),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT
#ifdef Py_TPFLAGS_IMMUTABLETYPE
             | Py_TPFLAGS_IMMUTABLETYPE
#endif
    ,
    .slots = lock_slots,
};

/* --- The publisher core -------------------------------------------------------------------- */

/*
 * The state of flowpy.submission.SubmissionPublisher that its producers use,
 * as slots of a base class, and the whole producer path in C: submit, offer,
 * _publish_chunk (submit_many's chunks) and _recover are the methods of
 * this class, and everything they do, the reference's _publish,
 * _publish_locked, _publish_to, _retry, _await_space, _wait_turn,
 * _offer_each, _closed_error, _live, _acquire_contended and _recover,
 * is done here by the C functions of the same names, with the reference's
 * behaviour, messages and exceptions. No method of `self` is looked up by
 * name: this code calls only the lock and Conditions in its slots, the
 * subscriptions (a compiled one through this file's static functions, one
 * of the pure-Python core through its methods), `on_drop`, and the module
 * functions and classes that cbuffered_exec imported once (core_module_state).
 * SubmissionPublisher's other methods (subscribe, close, the queries) stay
 * Python and share the slots through their member descriptors.
 *
 * Every field is written, by this code or by the reference's, only by the
 * thread holding the producer lock, and this code reads them only holding
 * it, except the GIL build's fast path of submit, which reads them in one
 * section as if it held it. Without the GIL, the lock orders them; the
 * reference reads _closed and _subscriptions without it (is_closed,
 * snapshot), so this code writes _subscriptions as the member descriptor
 * does (prune). _blocked, which tests poll, and which the end of a wait for
 * space clears even when an interrupt inside Condition.wait lost the lock
 * (as the reference's finally does), is read and written with
 * ATOMIC_LOAD/ATOMIC_STORE.
 *
 * Python code runs at every call named above; between two of them every
 * field is consistent, as between two statements of the reference. A
 * producer's "half-updated" states are the reference's own, with the same
 * `finally` clauses: _blocked names this thread from the start of the wait
 * for space to its end, and _turn_waiters counts this thread while it is
 * inside _turn.wait().
 */
typedef struct {
    PyObject_HEAD
    PyObject *lock;             /* _lock: the producer lock; NULL before __init__ */
    PyObject *subscriptions;    /* _subscriptions: a tuple, replaced, never mutated */
    PyObject *turn;             /* _turn: the Condition producers wait on for their turn; NULL before __init__ */
    PyObject *closed_exception; /* _closed_exception: the error of close_exceptionally, None, or NULL before __init__ */
    Py_ssize_t turn_waiters;    /* _turn_waiters: producers inside _turn.wait() */
    unsigned long blocked;      /* _blocked: ident of the producer waiting for space; 0 if none */
    char closed;                /* _closed */
} CoreObject;

/* What the producer path calls besides its slots: imported or made once, in
   cbuffered_exec (core_exec), and kept in the module's state after the
   subscriptions' module_state (cbuffered_state). */
typedef struct {
    PyObject *closed_publisher_error; /* flowpy.errors.ClosedPublisherError */
    PyObject *reentrant_submit_error; /* flowpy.errors.ReentrantSubmitError */
    PyObject *check_timeout;          /* flowpy._checks.check_timeout */
    PyObject *none_error;             /* flowpy._checks.none_error */
    PyObject *sleep;                  /* time.sleep: the reference's _sleep */
    PyObject *monotonic;              /* time.monotonic: the reference's _monotonic */
    PyObject *negative_is_zero;       /* ("negative_is_zero",): check_timeout's keyword, for a vectorcall */
    PyObject *zero;                   /* 0, for sleep(0) */
    PyObject *str_offer;
    PyObject *str_has_space;
    PyObject *str_wait_for_space;
    PyObject *str_stop_waiting;
    PyObject *str_count_drop;
    PyObject *str_resume;
    PyObject *str_delivering_here;
    PyObject *str_is_closed;
    PyObject *str_subscriber;
    PyObject *str_is_owned; /* "_is_owned" */
    PyObject *str_wait;     /* "wait" */
    PyObject *str_notify;   /* "notify_all" */
    PyObject *str_acquire;
    PyObject *str_release;
    /* The reference's _CONTENDED_YIELDS: 16, or 0 where the GIL was off when this module was imported. */
    int contended_yields;
} core_module_state;

/* The module's state: the subscriptions' first, so that state_of() reads it. */
typedef struct {
    module_state buffered;
    core_module_state core;
} cbuffered_state;

static void core_dealloc(PyObject *op);

static inline int
is_buffered(PyObject *op)
{
    return Py_TYPE(op)->tp_dealloc == buf_dealloc;
}

/* The state of the module whose PublisherCore `self` is an instance of (of a subclass of). */
static core_module_state *
core_state(CoreObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    while (type->tp_dealloc != core_dealloc) { /* a subclass: Python's subtype_dealloc */
        type = type->tp_base;
    }
    return &((cbuffered_state *)PyType_GetModuleState(type))->core;
}

/* The AttributeError of reading a slot that __init__ has not set. */
static int
unset_slot(CoreObject *self, const char *name)
{
    PyErr_Format(PyExc_AttributeError, "'%.200s' object has no attribute '%s'", Py_TYPE(self)->tp_name, name);
    return -1;
}

/* The operation a timeout stands for, in messages: the reference's _operation.
   A negative timeout is submit's None (wait without limit). */
static inline const char *
operation_of(double timeout)
{
    return timeout < 0 ? "submit" : "offer";
}

/* raise none_error("item", "2.13"), as the reference does for a None item. */
static PyObject *
none_item_error(CoreObject *self)
{
    PyObject *error = PyObject_CallFunction(core_state(self)->none_error, "ss", "item", "2.13");
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return NULL;
}

/* raise self._closed_error(operation): the reference's ClosedPublisherError. */
static int
closed_error(CoreObject *self, const char *operation)
{
    PyObject *type = core_state(self)->closed_publisher_error;
    if (self->closed_exception != NULL && self->closed_exception != Py_None) {
        PyErr_Format(type, "cannot %s(): publisher was closed by close_exceptionally(); check closed_exception",
                     operation);
    }
    else {
        PyErr_Format(type, "cannot %s(): publisher was closed by close()", operation);
    }
    return -1;
}

/* Call `name` of `obj` with no argument, or with `arg`; -1 with an exception set if it raised. */
static int
call_method(PyObject *obj, PyObject *name, PyObject *arg)
{
    PyObject *r = arg == NULL ? PyObject_CallMethodNoArgs(obj, name) : PyObject_CallMethodOneArg(obj, name, arg);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* The truth of what `name` of `obj` returns with no argument: 1, 0, or -1 with an exception set. */
static int
call_predicate(PyObject *obj, PyObject *name)
{
    PyObject *r = PyObject_CallMethodNoArgs(obj, name);
    if (r == NULL) {
        return -1;
    }
    int truth = PyObject_IsTrue(r);
    Py_DECREF(r);
    return truth;
}

/* Make `later`, just raised, have the exception `earlier` (stolen; NULL if
   none) as its __context__, as a raise in an except or finally clause does. */
static void
raise_chained(PyObject *earlier)
{
    if (earlier != NULL) {
        chain_exception(earlier);
    }
}

/* time.monotonic() into *now: 0, or -1 with an exception set. */
static int
monotonic_now(core_module_state *st, double *now)
{
    PyObject *r = PyObject_CallNoArgs(st->monotonic);
    if (r == NULL) {
        return -1;
    }
    *now = PyFloat_AsDouble(r);
    Py_DECREF(r);
    return *now == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* --- Subscriptions of either core ---------------------------------------------------------------- */

/* A compiled subscription through this file's functions; one of the
   pure-Python core, or a stand-in, through its methods. */

/* The integer result of a subscription method; 0 with *status, or -1 with an exception set. */
static int
status_of(PyObject *r, Py_ssize_t *status)
{
    if (r == NULL) {
        return -1;
    }
    *status = PyLong_AsSsize_t(r);
    Py_DECREF(r);
    return *status == -1 && PyErr_Occurred() ? -1 : 0;
}

/* subscription.offer(item): the items now buffered, 0 if full, negative if closed. */
static int
offer_any(core_module_state *st, PyObject *subscription, PyObject *item, Py_ssize_t *status)
{
    if (is_buffered(subscription)) {
        *status = offer_item((BufObject *)subscription, item);
        return *status == -2 ? -1 : 0;
    }
    return status_of(PyObject_CallMethodOneArg(subscription, st->str_offer, item), status);
}

/* subscription.is_closed: 1, 0, or -1 with an exception set. */
static int
is_closed_any(core_module_state *st, PyObject *subscription)
{
    PyObject *r = is_buffered(subscription) ? buf_get_is_closed(subscription, NULL)
                                            : PyObject_GetAttr(subscription, st->str_is_closed);
    if (r == NULL) {
        return -1;
    }
    int truth = PyObject_IsTrue(r);
    Py_DECREF(r);
    return truth;
}

/* subscription.has_space(): 1, 0, or -1 with an exception set. */
static int
has_space_any(core_module_state *st, PyObject *subscription)
{
    if (is_buffered(subscription)) {
        return has_space((BufObject *)subscription);
    }
    return call_predicate(subscription, st->str_has_space);
}

/* subscription.delivering_here(): 1, 0, or -1 with an exception set. */
static int
delivering_here_any(core_module_state *st, PyObject *subscription)
{
    if (is_buffered(subscription)) {
        PyObject *r = buf_delivering_here(subscription, NULL);
        if (r == NULL) {
            return -1;
        }
        int here = r == Py_True;
        Py_DECREF(r);
        return here;
    }
    return call_predicate(subscription, st->str_delivering_here);
}

/* subscription.wait_for_space(remaining); -1 with an exception set if it raised. */
static int
wait_for_space_any(core_module_state *st, PyObject *subscription, PyObject *remaining)
{
    if (is_buffered(subscription)) {
        PyObject *r = buf_wait_for_space(subscription, remaining);
        if (r == NULL) {
            return -1;
        }
        Py_DECREF(r);
        return 0;
    }
    return call_method(subscription, st->str_wait_for_space, remaining);
}

/* A method without arguments and result (stop_waiting, count_drop, resume) of
   either core: `compiled` is its C function, `name` its name. */
static int
call_any(PyObject *subscription, PyObject *(*compiled)(PyObject *, PyObject *), PyObject *name)
{
    if (is_buffered(subscription)) {
        PyObject *r = compiled(subscription, NULL);
        if (r == NULL) {
            return -1;
        }
        Py_DECREF(r);
        return 0;
    }
    return call_method(subscription, name, NULL);
}

/* subscription.subscriber: a new reference (None once closed), or NULL with an exception set. */
static PyObject *
subscriber_any(core_module_state *st, PyObject *subscription)
{
    if (is_buffered(subscription)) {
        return buf_get_subscriber(subscription, NULL);
    }
    return PyObject_GetAttr(subscription, st->str_subscriber);
}

/* --- The producer lock, of either core ---------------------------------------------------------- */

/* The reference's `lock._is_owned()`: 1, 0, or -1 with an exception set. */
static int
lock_is_mine(CoreObject *self, PyObject *lock)
{
    if (is_producer_lock(lock)) {
        return lock_owned_by((LockObject *)lock, PyThread_get_thread_ident());
    }
    return call_predicate(lock, core_state(self)->str_is_owned);
}

/* The reference's `lock.acquire()`, blocking: 0, or -1 with what a signal handler raised. */
static int
lock_take_blocking(CoreObject *self, PyObject *lock)
{
    if (is_producer_lock(lock)) {
        LockObject *producer_lock = (LockObject *)lock;
        unsigned long me = PyThread_get_thread_ident();
        int taken = lock_try_enter(producer_lock, me);
        if (taken != 0) {
            return taken < 0 ? -1 : 0;
        }
        if (mutex_wait(producer_lock->mutex, 1) < 0) {
            return -1;
        }
        lock_own(producer_lock, me, 1);
        return 0;
    }
    return call_method(lock, core_state(self)->str_acquire, NULL);
}

/* The reference's `lock.acquire(False)`: 1 if taken, 0 if not, -1 with an exception set. */
static int
lock_take_now(CoreObject *self, PyObject *lock)
{
    if (is_producer_lock(lock)) {
        return lock_try_enter((LockObject *)lock, PyThread_get_thread_ident());
    }
    PyObject *r = PyObject_CallMethodOneArg(lock, core_state(self)->str_acquire, Py_False);
    if (r == NULL) {
        return -1;
    }
    int taken = PyObject_IsTrue(r);
    Py_DECREF(r);
    return taken;
}

/* The reference's `lock.release()`: 0, or -1 with an exception set
   (RuntimeError if this thread does not hold it). */
static int
lock_give(CoreObject *self, PyObject *lock)
{
    if (is_producer_lock(lock)) {
        LockObject *producer_lock = (LockObject *)lock;
        if (!lock_owned_by(producer_lock, PyThread_get_thread_ident())) {
            PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
            return -1;
        }
        lock_exit(producer_lock);
        return 0;
    }
    return call_method(lock, core_state(self)->str_release, NULL);
}

/* The reference's _acquire_contended: another thread holds `lock`. With the
   GIL, yield it (sleep(0)) up to contended_yields times, taking the lock if
   it is free after a yield; then block on it. */
static int
acquire_contended(CoreObject *self, PyObject *lock)
{
    core_module_state *st = core_state(self);
    for (int i = 0; i < st->contended_yields; i++) {
        PyObject *r = PyObject_CallOneArg(st->sleep, st->zero);
        if (r == NULL) {
            return -1;
        }
        Py_DECREF(r);
        int taken = lock_take_now(self, lock);
        if (taken != 0) {
            return taken < 0 ? -1 : 0;
        }
    }
    return lock_take_blocking(self, lock);
}

/* The reference's producer entry: `if not lock.acquire(False):
   self._acquire_contended()`, and on an exception _release_if_taken(lock). */
static int
lock_take(CoreObject *self, PyObject *lock)
{
    int taken = lock_take_now(self, lock);
    if (taken > 0 || (taken == 0 && acquire_contended(self, lock) == 0)) {
        return 0;
    }
    PyObject *exc = take_exception();
    int owned = lock_is_mine(self, lock);
    if (owned != 0 && (owned < 0 || lock_give(self, lock) < 0)) {
        chain_exception(exc);
    }
    else {
        restore_exception(exc);
    }
    return -1;
}

/* --- The producer path ------------------------------------------------------------------------- */

/* self._subscriptions = self._live(): drop the closed subscriptions. The
   caller holds the lock, as every writer of _subscriptions does; without the
   GIL the store is the one that PyMember_SetOne makes for `_subscriptions =`
   (a release store in the object's critical section), since snapshot()
   reads the attribute without the lock. */
static int
prune(CoreObject *self)
{
    /* _live: tuple(s for s in self._subscriptions if not s.is_closed) */
    core_module_state *st = core_state(self);
    if (self->subscriptions == NULL) {
        return unset_slot(self, "_subscriptions");
    }
    PyObject *iterator = PyObject_GetIter(self->subscriptions);
    if (iterator == NULL) {
        return -1;
    }
    PyObject *open = PyList_New(0), *subscription;
    if (open == NULL) {
        Py_DECREF(iterator);
        return -1;
    }
    while ((subscription = PyIter_Next(iterator)) != NULL) {
        int closed = is_closed_any(st, subscription);
        int failed = closed < 0 || (!closed && PyList_Append(open, subscription) < 0);
        Py_DECREF(subscription);
        if (failed) {
            break;
        }
    }
    Py_DECREF(iterator);
    PyObject *live = PyErr_Occurred() ? NULL : PyList_AsTuple(open);
    Py_DECREF(open);
    if (live == NULL) {
        return -1;
    }
    PyObject *old;
#ifdef Py_GIL_DISABLED
    Py_BEGIN_CRITICAL_SECTION(self);
    old = self->subscriptions;
    __atomic_store_n(&self->subscriptions, live, __ATOMIC_RELEASE);
    Py_END_CRITICAL_SECTION();
#else
    old = self->subscriptions;
    self->subscriptions = live;
#endif
    Py_XDECREF(old);
    return 0;
}

/* self._subscriptions as a new reference to a tuple, or NULL with an exception set. */
static PyObject *
subscriptions_of(CoreObject *self, const char *operation)
{
    PyObject *subscriptions = self->subscriptions;
    if (subscriptions == NULL || !PyTuple_CheckExact(subscriptions)) {
        PyErr_Format(PyExc_TypeError, "%s(): _subscriptions must be a tuple", operation);
        return NULL;
    }
    return Py_NewRef(subscriptions);
}

/* self._turn.notify_all(); -1 with an exception set if it raised. */
static int
notify_turn(CoreObject *self)
{
    if (self->turn == NULL) {
        return unset_slot(self, "_turn");
    }
    PyObject *turn = Py_NewRef(self->turn); /* Python code runs: _turn may be replaced meanwhile */
    int r = call_method(turn, core_state(self)->str_notify, NULL);
    release_keeping_error(turn);
    return r;
}

/* The reference's _wait_turn(timeout): wait while another producer is
   blocked for space holding the turn. The caller holds the lock. */
static int
wait_turn(CoreObject *self, double timeout)
{
    unsigned long me = PyThread_get_thread_ident();
    unsigned long blocked;
    while ((blocked = ATOMIC_LOAD(self->blocked)) != 0) {
        if (blocked == me) {
            PyErr_Format(core_state(self)->reentrant_submit_error,
                         "cannot %s(): this thread's own submit() is waiting for buffer space, and a subscriber "
                         "it delivers to meanwhile must not publish to the same publisher",
                         operation_of(timeout));
            return -1;
        }
        if (self->turn == NULL) {
            return unset_slot(self, "_turn");
        }
        PyObject *turn = Py_NewRef(self->turn);
        self->turn_waiters++;
        int r = call_method(turn, core_state(self)->str_wait, NULL);
        self->turn_waiters--; /* the finally */
        release_keeping_error(turn);
        if (r < 0) {
            return -1;
        }
    }
    return 0;
}

/* The finally of the reference's _await_space, with the exception of its
   body, `earlier` (stolen; NULL if none): _blocked = 0; if producers wait
   for their turn and this thread holds the lock (it does not if an
   interrupt came inside Condition.wait after it released it: then _recover
   takes it back and hands the turn on), notify them, again if that raised;
   then subscription.stop_waiting(). Returns -1 if an exception is set. */
static int
await_space_finally(CoreObject *self, core_module_state *st, PyObject *subscription, PyObject *earlier)
{
    ATOMIC_STORE(self->blocked, 0);
    if (self->turn_waiters) {
        int owned = self->lock == NULL ? unset_slot(self, "_lock") : lock_is_mine(self, self->lock);
        if (owned < 0) {
            raise_chained(earlier);
            return -1;
        }
        if (owned && notify_turn(self) < 0) {
            PyObject *failed = take_exception();
            if (earlier != NULL) {
                PyException_SetContext(failed, earlier); /* steals earlier */
            }
            if (notify_turn(self) < 0) { /* an interrupt before the waiters were woken: wake them */
                chain_exception(failed);
            }
            else {
                restore_exception(failed);
            }
            return -1;
        }
    }
    if (call_any(subscription, buf_stop_waiting, st->str_stop_waiting) < 0) {
        raise_chained(earlier);
        return -1;
    }
    if (earlier != NULL) {
        restore_exception(earlier);
        return -1;
    }
    return 0;
}

/* The reference's _await_space(subscription, timeout): block until
   `subscription` has space, closes, or `timeout` seconds pass (a negative
   one: submit's None, no limit). The caller holds the lock.
   ClosedPublisherError if the publisher closes meanwhile;
   ReentrantSubmitError if submit's wait could only end by this thread. */
static int
await_space(CoreObject *self, PyObject *subscription, double timeout)
{
    core_module_state *st = core_state(self);
    int here = delivering_here_any(st, subscription);
    if (here != 0) {
        if (here < 0 || timeout >= 0) {
            return here < 0 ? -1 : 0;
        }
        PyObject *subscriber = subscriber_any(st, subscription);
        if (subscriber != NULL) {
            PyErr_Format(st->reentrant_submit_error,
                         "cannot submit(): the buffer of %R is full and this thread is inside one of its methods, "
                         "so it could never drain; submit from another thread, use offer(), or deliver on a pool "
                         "executor",
                         subscriber);
            Py_DECREF(subscriber);
        }
        return -1;
    }
    double deadline = 0.0;
    if (timeout >= 0) {
        double now;
        if (monotonic_now(st, &now) < 0) {
            return -1;
        }
        deadline = now + timeout;
    }
    ATOMIC_STORE(self->blocked, PyThread_get_thread_ident());
    /* The try: on leaving it, await_space_finally. */
    for (;;) {
        int space = has_space_any(st, subscription);
        if (space != 0) {
            if (space > 0 && self->closed) {
                closed_error(self, operation_of(timeout));
            }
            break;
        }
        if (self->closed) {
            closed_error(self, operation_of(timeout));
            break;
        }
        PyObject *remaining = Py_None;
        if (timeout >= 0) {
            double now;
            if (monotonic_now(st, &now) < 0) {
                break;
            }
            if (deadline - now <= 0) {
                return await_space_finally(self, st, subscription, NULL); /* the return in the try */
            }
            remaining = PyFloat_FromDouble(deadline - now);
            if (remaining == NULL) {
                break;
            }
        }
        int waited = wait_for_space_any(st, subscription, remaining);
        if (remaining != Py_None) {
            release_keeping_error(remaining);
        }
        if (waited < 0) {
            break;
        }
    }
    return await_space_finally(self, st, subscription, take_exception());
}

/* The reference's _retry(item, saturated, lag, timeout, on_drop) for the
   `n` subscriptions `saturated`, which were full: wait for space in each
   (unless timeout is 0: offer's default), offer again, and if it is still
   full, retry once more if on_drop (NULL: None) returns true; count a drop
   otherwise. *lag: the lag so far in, the result out (minus the drops if
   any). The caller holds the lock and a reference to each subscription. */
static int
retry(CoreObject *self, PyObject *item, PyObject *const *saturated, Py_ssize_t n, Py_ssize_t *lag, double timeout,
      PyObject *on_drop)
{
    core_module_state *st = core_state(self);
    Py_ssize_t drops = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *subscription = saturated[i];
        Py_ssize_t status;
        if (timeout != 0 && await_space(self, subscription, timeout) < 0) {
            return -1;
        }
        if (offer_any(st, subscription, item, &status) < 0) {
            return -1;
        }
        if (status == 0 && on_drop != NULL) {
            PyObject *subscriber = subscriber_any(st, subscription);
            if (subscriber == NULL) {
                return -1;
            }
            int again = 0;
            if (subscriber != Py_None) {
                PyObject *r = PyObject_CallFunctionObjArgs(on_drop, subscriber, item, NULL);
                again = r == NULL ? -1 : PyObject_IsTrue(r);
                Py_XDECREF(r);
            }
            release_keeping_error(subscriber);
            if (again < 0 || (again && offer_any(st, subscription, item, &status) < 0)) {
                return -1;
            }
        }
        if (status == 0) {
            drops++;
            if (call_any(subscription, buf_count_drop, st->str_count_drop) < 0) {
                return -1;
            }
        }
        else if (status > *lag && !drops) {
            *lag = status;
        }
        else if (status < 0 && prune(self) < 0) {
            return -1;
        }
    }
    if (drops) {
        *lag = -drops;
    }
    return 0;
}

/* The reference's _publish_to(item, subscriptions, timeout, on_drop): offer
   `item` to each of `subscriptions` (a tuple), then retry the full ones.
   The caller holds the lock, no producer holds the turn. */
static PyObject *
publish_to(CoreObject *self, PyObject *item, PyObject *subscriptions, double timeout, PyObject *on_drop)
{
    core_module_state *st = NULL; /* looked up only for a subscription of the pure-Python core */
    PyObject *saturated = NULL;   /* a list, made for the first full subscription */
    PyObject *result = NULL;
    Py_ssize_t lag = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(subscriptions); i++) {
        PyObject *subscription = PyTuple_GET_ITEM(subscriptions, i);
        Py_ssize_t status;
        if (is_buffered(subscription)) {
            status = offer_item((BufObject *)subscription, item);
            if (status == -2) {
                goto done;
            }
        }
        else {
            if (st == NULL) {
                st = core_state(self);
            }
            if (offer_any(st, subscription, item, &status) < 0) {
                goto done;
            }
        }
        if (status > lag) {
            lag = status;
        }
        else if (status == 0) {
            if (saturated == NULL && (saturated = PyList_New(0)) == NULL) {
                goto done;
            }
            if (PyList_Append(saturated, subscription) < 0) {
                goto done;
            }
        }
        else if (status < 0 && prune(self) < 0) {
            goto done;
        }
    }
    if (saturated != NULL
        && retry(self, item, PySequence_Fast_ITEMS(saturated), PyList_GET_SIZE(saturated), &lag, timeout, on_drop)
               < 0) {
        goto done;
    }
    result = PyLong_FromSsize_t(lag);
done:
    Py_XDECREF(saturated);
    return result;
}

/* The reference's _publish_locked(item, timeout, on_drop), for an item that
   is not None: wait for the turn, then publish. The caller holds the lock. */
static PyObject *
publish_locked(CoreObject *self, PyObject *item, double timeout, PyObject *on_drop)
{
    if (ATOMIC_LOAD(self->blocked) && wait_turn(self, timeout) < 0) {
        return NULL;
    }
    PyObject *subscriptions = subscriptions_of(self, operation_of(timeout));
    if (subscriptions == NULL) {
        return NULL;
    }
    PyObject *result;
    if (PyTuple_GET_SIZE(subscriptions) == 0) {
        result = self->closed ? (closed_error(self, operation_of(timeout)), NULL) : PyLong_FromLong(0);
    }
    else {
        result = publish_to(self, item, subscriptions, timeout, on_drop);
    }
    Py_DECREF(subscriptions);
    return result;
}

/* The reference's _recover(lock): after an exception cut a producer call
   short, before it releases `lock`. Takes `lock` again if an interrupt
   inside Condition.wait lost it, wakes the producers waiting for the turn
   if that wait held it, and resumes every subscription (starts the task for
   items left waiting). The caller holds `lock` or lost it so. */
static int
recover(CoreObject *self, PyObject *lock)
{
    core_module_state *st = core_state(self);
    int owned = lock_is_mine(self, lock);
    if (owned < 0 || (!owned && lock_take_blocking(self, lock) < 0)) {
        return -1;
    }
    if (self->turn_waiters && !ATOMIC_LOAD(self->blocked) && notify_turn(self) < 0) {
        return -1;
    }
    if (self->subscriptions == NULL) { /* unset only if __init__ did not run */
        return 0;
    }
    PyObject *iterator = PyObject_GetIter(self->subscriptions);
    if (iterator == NULL) {
        return -1;
    }
    PyObject *subscription;
    while ((subscription = PyIter_Next(iterator)) != NULL) {
        int r = call_any(subscription, buf_resume, st->str_resume);
        Py_DECREF(subscription);
        if (r < 0) {
            break;
        }
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

/* The end of a producer call that took `lock` (a reference the caller
   owns, given up here) and got `result` (NULL if it raised): the
   reference's `except BaseException: self._recover(lock); raise` and
   `finally: lock.release()`. */
static PyObject *
leave(CoreObject *self, PyObject *lock, PyObject *result)
{
    PyObject *exc = NULL;
    if (result == NULL) {
        exc = take_exception();
        if (recover(self, lock) < 0) {
            chain_exception(exc);
            exc = take_exception();
        }
    }
    if (lock_give(self, lock) < 0) {
        raise_chained(exc);
        Py_CLEAR(result);
    }
    else if (exc != NULL) {
        restore_exception(exc);
    }
    if (result != NULL) {
        Py_DECREF(lock); /* no exception to keep */
    }
    else {
        release_keeping_error(lock);
    }
    return result;
}

/* The reference's _publish(item, timeout, on_drop): submit with a negative
   timeout (None), offer with one of 0 or more. */
static PyObject *
publish(CoreObject *self, PyObject *item, double timeout, PyObject *on_drop)
{
    if (item == Py_None) {
        return none_item_error(self);
    }
    if (self->lock == NULL) {
        unset_slot(self, "_lock");
        return NULL;
    }
    PyObject *lock = Py_NewRef(self->lock); /* Python code runs: _lock may be replaced meanwhile */
    if (lock_take(self, lock) < 0) {
        release_keeping_error(lock);
        return NULL;
    }
    return leave(self, lock, publish_locked(self, item, timeout, on_drop));
}

/* The reference's _offer_each(subscription, part) for part = chunk[start:stop]:
   offer the items one by one, waiting for space as submit does; the rest
   goes nowhere if the subscription closes. The caller holds the lock. */
static int
offer_each(CoreObject *self, PyObject *subscription, PyObject *chunk, Py_ssize_t start, Py_ssize_t stop)
{
    core_module_state *st = core_state(self);
    PyObject *part = PyList_GetSlice(chunk, start, stop); /* the reference's part: a list of its own */
    if (part == NULL) {
        return -1;
    }
    int result = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(part); i++) {
        PyObject *item = PyList_GET_ITEM(part, i); /* borrowed: `part` is not shared, and unchanged */
        Py_ssize_t status, lag = 0;
        if (offer_any(st, subscription, item, &status) < 0) {
            result = -1;
            break;
        }
        if (status == 0 && retry(self, item, &subscription, 1, &lag, -1.0, NULL) < 0) {
            result = -1;
            break;
        }
        if (status < 0) {
            result = prune(self);
            break;
        }
    }
    release_keeping_error(part);
    return result;
}

/* The free slots of a subscription of either core, or -1 with an exception set. */
static Py_ssize_t
room_in(PyObject *subscription)
{
    if (is_buffered(subscription)) {
        return free_slots((BufObject *)subscription);
    }
    PyObject *r = PyObject_CallMethod(subscription, "free_slots", NULL);
    if (r == NULL) {
        return -1;
    }
    Py_ssize_t room = PyLong_AsSsize_t(r);
    Py_DECREF(r);
    return room;
}
/* Whether chunk still holds `stop` items; else -1 with an exception set.
   Only a direct caller of the private _publish_chunk could have changed it:
   submit_many's chunk is its own. Looked at after any Python code ran. */
static int
check_chunk(PyObject *chunk, Py_ssize_t stop)
{
    if (stop <= PyList_GET_SIZE(chunk)) {
        return 0;
    }
    PyErr_SetString(PyExc_RuntimeError, "_publish_chunk(): the chunk shrank while it was published");
    return -1;
}

/* subscription.extend(chunk[start:stop]) for a subscription of either core:
   the items now buffered, 0 if they did not fit, -1 if closed, -2 with an
   exception set. */
static Py_ssize_t
extend_any(PyObject *subscription, PyObject *chunk, Py_ssize_t start, Py_ssize_t stop)
{
    if (check_chunk(chunk, stop) < 0) {
        return -2;
    }
    if (is_buffered(subscription)) {
        return extend_items((BufObject *)subscription, chunk, start, stop);
    }
    PyObject *part = PyList_GetSlice(chunk, start, stop);
    if (part == NULL) {
        return -2;
    }
    PyObject *r = PyObject_CallMethod(subscription, "extend", "O", part);
    Py_DECREF(part);
    if (r == NULL) {
        return -2;
    }
    Py_ssize_t status = PyLong_AsSsize_t(r);
    Py_DECREF(r);
    return status == -1 && PyErr_Occurred() ? -2 : status;
}


/* One pass of the reference's _publish_chunk loop at chunk[done:end]:
   returns the new `done`, or -1 with an exception set. */
static Py_ssize_t
publish_part(CoreObject *self, PyObject *chunk, Py_ssize_t done, Py_ssize_t end)
{
    if (ATOMIC_LOAD(self->blocked) && wait_turn(self, -1.0) < 0) {
        return -1;
    }
    PyObject *subscriptions = subscriptions_of(self, "_publish_chunk");
    if (subscriptions == NULL) {
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(subscriptions), room = PY_SSIZE_T_MAX, result = -1;
    if (n == 0) {
        if (!self->closed) {
            result = end; /* as submit() with no subscribers: the items go nowhere */
        }
        else {
            closed_error(self, "submit");
        }
        goto done;
    }
    for (Py_ssize_t i = 0; i < n && room > 0; i++) {
        Py_ssize_t free = room_in(PyTuple_GET_ITEM(subscriptions, i));
        if (free == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (free < room) {
            room = free;
        }
    }
    if (room <= 0) { /* a buffer is full or closed: one item the general way, which may wait */
        if (check_chunk(chunk, done + 1) < 0) {
            goto done;
        }
        PyObject *item = Py_NewRef(PyList_GET_ITEM(chunk, done));
        PyObject *r = publish_locked(self, item, -1.0, NULL);
        Py_DECREF(item);
        if (r != NULL) {
            Py_DECREF(r);
            result = done + 1;
        }
        goto done;
    }
    Py_ssize_t stop = room < end - done ? done + room : end;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *subscription = PyTuple_GET_ITEM(subscriptions, i);
        Py_ssize_t status = extend_any(subscription, chunk, done, stop);
        if (status == -2) {
            goto done;
        }
        if (status == 0) { /* it filled meanwhile: see the reference's _offer_each */
            if (offer_each(self, subscription, chunk, done, stop) < 0) {
                goto done;
            }
        }
        else if (status < 0 && prune(self) < 0) {
            goto done;
        }
    }
    result = stop;
done:
    Py_DECREF(subscriptions);
    return result;
}

/* The reference's _publish_chunk(chunk, end); the caller holds the lock. */
static PyObject *
core_publish_chunk(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    CoreObject *self = (CoreObject *)op;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "_publish_chunk() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *chunk = args[0];
    if (!PyList_CheckExact(chunk)) {
        PyErr_Format(PyExc_TypeError, "chunk must be a list, got %R", chunk);
        return NULL;
    }
    Py_ssize_t end = PyLong_AsSsize_t(args[1]);
    if (end == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (end < 0 || end > PyList_GET_SIZE(chunk)) {
        PyErr_Format(PyExc_ValueError, "_publish_chunk(): end must be in [0, %zd], got %zd",
                     PyList_GET_SIZE(chunk), end);
        return NULL;
    }
    Py_INCREF(chunk); /* Python code runs below; the list is read, never changed */
    Py_ssize_t done = 0;
    while (done >= 0 && done < end) {
        done = publish_part(self, chunk, done, end);
    }
    Py_DECREF(chunk);
    if (done < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The reference's submit: _publish(item, None, None), with a fast path. */
static PyObject *
core_submit(PyObject *op, PyObject *item)
{
    CoreObject *self = (CoreObject *)op;
    if (item == Py_None) {
        return none_item_error(self);
    }
    PyObject *lock = self->lock;
    if (lock == NULL) {
        unset_slot(self, "_lock");
        return NULL;
    }
    if (!is_producer_lock(lock)) { /* _lock was replaced from Python: the general path */
        return publish(self, item, -1.0, NULL);
    }
    LockObject *producer_lock = (LockObject *)lock;
    unsigned long me = PyThread_get_thread_ident();
#ifndef Py_GIL_DISABLED
    if (producer_lock->owner != 0 && producer_lock->owner != me) {
        return publish(self, item, -1.0, NULL); /* contended: yield, then block (_acquire_contended) */
    }
    /* The fast path, one section: no producer holds the lock but this
       thread, none waits for space, and every subscription takes the item
       without starting a task. Then the item is appended to each buffer
       with no Python code run, which is as if the lock had been taken. */
    PyObject *subscriptions = self->subscriptions;
    if (!self->blocked && subscriptions != NULL && PyTuple_CheckExact(subscriptions)) {
        Py_ssize_t n = PyTuple_GET_SIZE(subscriptions), i;
        for (i = 0; i < n; i++) {
            PyObject *subscription = PyTuple_GET_ITEM(subscriptions, i);
            if (!is_buffered(subscription) || !offer_is_plain((BufObject *)subscription)) {
                break;
            }
            if (ring_reserve((BufObject *)subscription) < 0) {
                return PyErr_NoMemory(); /* nothing was buffered yet */
            }
        }
        if (n > 0 && i == n) {
            Py_ssize_t lag = 0;
            for (i = 0; i < n; i++) {
                BufObject *buffered = (BufObject *)PyTuple_GET_ITEM(subscriptions, i);
                buffered->ring[(buffered->head + buffered->count) & (buffered->size - 1)] = Py_NewRef(item);
                if (++buffered->count > lag) {
                    lag = buffered->count;
                }
            }
            return PyLong_FromSsize_t(lag);
        }
    }
#endif
    /* Without the GIL, no fast path: the lock is taken first, and waited
       for as the reference's _acquire_contended does if another thread
       holds it (publish). */
    int taken = lock_try_enter(producer_lock, me);
    if (taken <= 0) { /* held by another thread (with the GIL: one that has yet to set owner) */
        return taken < 0 ? NULL : publish(self, item, -1.0, NULL);
    }
    Py_INCREF(lock); /* Python code runs: _lock may be replaced meanwhile */
    return leave(self, lock, publish_locked(self, item, -1.0, NULL));
}

/* The reference's offer(item, on_drop=None, *, timeout=None). */
static PyObject *
core_offer(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"item", "on_drop", "timeout", NULL};
    CoreObject *self = (CoreObject *)op;
    PyObject *item, *on_drop = Py_None, *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$O:offer", keywords, &item, &on_drop, &timeout)) {
        return NULL;
    }
    if (on_drop != Py_None && !PyCallable_Check(on_drop)) { /* inline: offer() is a per-item path */
        PyErr_Format(PyExc_TypeError, "on_drop must be callable or None, got %R", on_drop);
        return NULL;
    }
    double seconds = 0.0;
    if (timeout != Py_None) {
        /* check_timeout(timeout, negative_is_zero=True): a float, 0 or more */
        core_module_state *st = core_state(self);
        PyObject *call[2] = {timeout, Py_True};
        PyObject *checked = PyObject_Vectorcall(st->check_timeout, call, 1, st->negative_is_zero);
        if (checked == NULL) {
            return NULL;
        }
        seconds = PyFloat_AsDouble(checked);
        Py_DECREF(checked);
        if (seconds == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
    }
    return publish(self, item, seconds, on_drop == Py_None ? NULL : on_drop);
}

/* The reference's _recover(lock), for submit_many's loop. */
static PyObject *
core_recover(PyObject *op, PyObject *lock)
{
    if (recover((CoreObject *)op, lock) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
core_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwargs))
{
    CoreObject *self = (CoreObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->subscriptions = PyTuple_New(0);
    if (self->subscriptions == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
core_traverse(PyObject *op, visitproc visit, void *arg)
{
    CoreObject *self = (CoreObject *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->lock);
    Py_VISIT(self->subscriptions);
    Py_VISIT(self->turn);
    Py_VISIT(self->closed_exception);
    return 0;
}

static int
core_clear(PyObject *op)
{
    CoreObject *self = (CoreObject *)op;
    Py_CLEAR(self->lock);
    Py_CLEAR(self->subscriptions);
    Py_CLEAR(self->turn);
    Py_CLEAR(self->closed_exception);
    return 0;
}

static void
core_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    (void)core_clear(op);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMethodDef core_methods[] = {
    {"submit", core_submit, METH_O,
     PyDoc_STR("submit($self, item, /)\n--\n\nThe compiled SubmissionPublisher.submit; see the reference.")},
    {"_publish_chunk", (PyCFunction)(void (*)(void))core_publish_chunk, METH_FASTCALL,
     PyDoc_STR("_publish_chunk($self, chunk, end, /)\n--\n\nThe compiled SubmissionPublisher._publish_chunk; see the "
               "reference.")},
    {"offer", (PyCFunction)(void (*)(void))core_offer, METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("offer($self, /, item, on_drop=None, *, timeout=None)\n--\n\nThe compiled "
               "SubmissionPublisher.offer; see the reference.")},
    {"_recover", core_recover, METH_O,
     PyDoc_STR("_recover($self, lock, /)\n--\n\nThe compiled SubmissionPublisher._recover; see the reference.")},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef core_members[] = {
    {"_lock", Py_T_OBJECT_EX, offsetof(CoreObject, lock), 0,
     PyDoc_STR("The producer lock, held for a whole submit or offer.")},
    {"_subscriptions", Py_T_OBJECT_EX, offsetof(CoreObject, subscriptions), 0,
     PyDoc_STR("The open subscriptions: a tuple, replaced, never mutated.")},
    {"_turn", Py_T_OBJECT_EX, offsetof(CoreObject, turn), 0,
     PyDoc_STR("The Condition producers wait on for their turn while another is blocked for space.")},
    {"_turn_waiters", Py_T_PYSSIZET, offsetof(CoreObject, turn_waiters), 0,
     PyDoc_STR("Producers inside _turn.wait(); _turn is notified only if there are any.")},
    {"_blocked", Py_T_ULONG, offsetof(CoreObject, blocked), 0,
     PyDoc_STR("Ident of the producer waiting for space, holding the turn; 0 if none.")},
    {"_closed", Py_T_BOOL, offsetof(CoreObject, closed), 0,
     PyDoc_STR("Whether close or close_exceptionally was called.")},
    {"_closed_exception", Py_T_OBJECT_EX, offsetof(CoreObject, closed_exception), 0,
     PyDoc_STR("The error given to close_exceptionally, or None.")},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(core_doc,
"PublisherCore()\n"
"--\n\n"
"The base of SubmissionPublisher when the compiled core is built: the state\n"
"its producers use, as slots, and the compiled producer path (submit, offer,\n"
"_publish_chunk, _recover).");

static PyType_Slot core_slots[] = {
    {Py_tp_doc, (void *)core_doc},
    {Py_tp_new, core_new},
    {Py_tp_dealloc, core_dealloc},
    {Py_tp_traverse, core_traverse},
    {Py_tp_clear, core_clear},
    {Py_tp_methods, core_methods},
    {Py_tp_members, core_members},
    {0, NULL},
};

static PyType_Spec core_spec = {
    .name = "flowpy._cbuffered.PublisherCore",
    .basicsize = sizeof(CoreObject),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC
#ifdef Py_TPFLAGS_IMMUTABLETYPE
             | Py_TPFLAGS_IMMUTABLETYPE
#endif
    ,
    .slots = core_slots,
};

/* --- first_none ------------------------------------------------------------------------- */

static PyObject *
first_none(PyObject *Py_UNUSED(module), PyObject *items)
{
    if (!PyList_CheckExact(items)) {
        PyErr_Format(PyExc_TypeError, "items must be a list, got %R", items);
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(items), i = 0;
    while (i < n && PyList_GET_ITEM(items, i) != Py_None) {
        i++;
    }
    return PyLong_FromSsize_t(i);
}

static PyMethodDef cbuffered_functions[] = {
    {"first_none", first_none, METH_O,
     PyDoc_STR("first_none(items) -> int\n--\n\nThe index of the first None in a list "
               "(by identity), or its length.")},
    {NULL, NULL, 0, NULL},
};

/* --- The module ------------------------------------------------------------------------- */

static int
intern_into(PyObject **slot, const char *name)
{
    *slot = PyUnicode_InternFromString(name);
    return *slot == NULL ? -1 : 0;
}

/* `module_name`.`name`, a new reference, or NULL with an exception set. */
static PyObject *
import_from(const char *module_name, const char *name)
{
    PyObject *module = PyImport_ImportModule(module_name);
    if (module == NULL) {
        return NULL;
    }
    PyObject *attribute = PyObject_GetAttrString(module, name);
    Py_DECREF(module);
    return attribute;
}

/* getattr(sys, "_is_gil_enabled", lambda: True)(): 1 or 0, or -1 with an exception set. */
static int
gil_enabled(void)
{
    PyObject *is_enabled = import_from("sys", "_is_gil_enabled");
    if (is_enabled == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
        return 1;
    }
    PyObject *enabled = PyObject_CallNoArgs(is_enabled);
    Py_DECREF(is_enabled);
    int truth = enabled == NULL ? -1 : PyObject_IsTrue(enabled);
    Py_XDECREF(enabled);
    return truth;
}

/* Fill the publisher core's part of the module state (core_module_state),
   once; `gil`: whether the GIL was on (gil_enabled). */
static int
core_exec(core_module_state *st, int gil)
{
    if ((st->closed_publisher_error = import_from("flowpy.errors", "ClosedPublisherError")) == NULL
        || (st->reentrant_submit_error = import_from("flowpy.errors", "ReentrantSubmitError")) == NULL
        || (st->check_timeout = import_from("flowpy._checks", "check_timeout")) == NULL
        || (st->none_error = import_from("flowpy._checks", "none_error")) == NULL
        || (st->sleep = import_from("time", "sleep")) == NULL
        || (st->monotonic = import_from("time", "monotonic")) == NULL
        || (st->zero = PyLong_FromLong(0)) == NULL
        || intern_into(&st->str_offer, "offer") < 0
        || intern_into(&st->str_has_space, "has_space") < 0
        || intern_into(&st->str_wait_for_space, "wait_for_space") < 0
        || intern_into(&st->str_stop_waiting, "stop_waiting") < 0
        || intern_into(&st->str_count_drop, "count_drop") < 0
        || intern_into(&st->str_resume, "resume") < 0
        || intern_into(&st->str_delivering_here, "delivering_here") < 0
        || intern_into(&st->str_is_closed, "is_closed") < 0
        || intern_into(&st->str_subscriber, "subscriber") < 0
        || intern_into(&st->str_is_owned, "_is_owned") < 0
        || intern_into(&st->str_wait, "wait") < 0
        || intern_into(&st->str_notify, "notify_all") < 0
        || intern_into(&st->str_acquire, "acquire") < 0
        || intern_into(&st->str_release, "release") < 0) {
        return -1;
    }
    st->negative_is_zero = Py_BuildValue("(s)", "negative_is_zero");
    if (st->negative_is_zero == NULL) {
        return -1;
    }
    st->contended_yields = gil ? 16 : 0; /* the reference's _CONTENDED_YIELDS */
    return 0;
}

static int
cbuffered_exec(PyObject *module)
{
    module_state *st = (module_state *)PyModule_GetState(module);
    if (intern_into(&st->str_on_subscribe, "on_subscribe") < 0
        || intern_into(&st->str_on_next, "on_next") < 0
        || intern_into(&st->str_on_error, "on_error") < 0
        || intern_into(&st->str_on_complete, "on_complete") < 0
        || intern_into(&st->str_acquire, "acquire") < 0
        || intern_into(&st->str_release, "release") < 0
        || intern_into(&st->str_notify_all, "notify_all") < 0
        || intern_into(&st->str_wait, "wait") < 0) {
        return -1;
    }
    st->type = PyType_FromModuleAndSpec(module, &buf_spec, NULL);
    if (st->type == NULL) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "BufferedSubscription", st->type) < 0 || add_ctl_bits(module) < 0) {
        return -1;
    }
    PyObject *lock_type = PyType_FromModuleAndSpec(module, &lock_spec, NULL);
    if (lock_type == NULL) {
        return -1;
    }
    int added_lock = PyModule_AddObjectRef(module, "ProducerLock", lock_type);
    Py_DECREF(lock_type);
    if (added_lock < 0) {
        return -1;
    }
    PyObject *core_type = PyType_FromModuleAndSpec(module, &core_spec, NULL);
    if (core_type == NULL) {
        return -1;
    }
    int added_core = PyModule_AddObjectRef(module, "PublisherCore", core_type);
    Py_DECREF(core_type);
    if (added_core < 0) {
        return -1;
    }
    PyObject *max_demand = PyLong_FromLongLong(MAX_DEMAND);
    if (max_demand == NULL) {
        return -1;
    }
    int added = PyModule_AddObjectRef(module, "MAX_DEMAND", max_demand);
    Py_DECREF(max_demand);
    int gil = added < 0 ? -1 : gil_enabled();
    if (gil < 0) {
        return -1;
    }
    st->claim_delay = gil ? 0.0 : CLAIM_DELAY_NO_GIL;
    PyObject *claim_delay = PyFloat_FromDouble(st->claim_delay);
    if (claim_delay == NULL) {
        return -1;
    }
    added = PyModule_AddObjectRef(module, "CLAIM_DELAY", claim_delay);
    Py_DECREF(claim_delay);
    return added < 0 ? -1 : core_exec(&((cbuffered_state *)st)->core, gil);
}

static int
cbuffered_traverse(PyObject *module, visitproc visit, void *arg)
{
    module_state *st = (module_state *)PyModule_GetState(module);
    Py_VISIT(st->type);
    core_module_state *core = &((cbuffered_state *)st)->core;
    Py_VISIT(core->closed_publisher_error);
    Py_VISIT(core->reentrant_submit_error);
    Py_VISIT(core->check_timeout);
    Py_VISIT(core->none_error);
    Py_VISIT(core->sleep);
    Py_VISIT(core->monotonic);
    return 0;
}

static int
cbuffered_clear(PyObject *module)
{
    module_state *st = (module_state *)PyModule_GetState(module);
    Py_CLEAR(st->type);
    Py_CLEAR(st->str_on_subscribe);
    Py_CLEAR(st->str_on_next);
    Py_CLEAR(st->str_on_error);
    Py_CLEAR(st->str_on_complete);
    Py_CLEAR(st->str_acquire);
    Py_CLEAR(st->str_release);
    Py_CLEAR(st->str_notify_all);
    Py_CLEAR(st->str_wait);
    core_module_state *core = &((cbuffered_state *)st)->core;
    Py_CLEAR(core->closed_publisher_error);
    Py_CLEAR(core->reentrant_submit_error);
    Py_CLEAR(core->check_timeout);
    Py_CLEAR(core->none_error);
    Py_CLEAR(core->sleep);
    Py_CLEAR(core->monotonic);
    Py_CLEAR(core->negative_is_zero);
    Py_CLEAR(core->zero);
    Py_CLEAR(core->str_offer);
    Py_CLEAR(core->str_has_space);
    Py_CLEAR(core->str_wait_for_space);
    Py_CLEAR(core->str_stop_waiting);
    Py_CLEAR(core->str_count_drop);
    Py_CLEAR(core->str_resume);
    Py_CLEAR(core->str_delivering_here);
    Py_CLEAR(core->str_is_closed);
    Py_CLEAR(core->str_subscriber);
    Py_CLEAR(core->str_is_owned);
    Py_CLEAR(core->str_wait);
    Py_CLEAR(core->str_notify);
    Py_CLEAR(core->str_acquire);
    Py_CLEAR(core->str_release);
    return 0;
}

static void
cbuffered_free(void *module)
{
    (void)cbuffered_clear((PyObject *)module);
}

static PyModuleDef_Slot cbuffered_slots[] = {
    {Py_mod_exec, cbuffered_exec},
#ifdef Py_GIL_DISABLED
    /* Built without the GIL, every section is under its subscription's
       mutex (see "Locking" at the top): importing this module leaves the
       GIL off. */
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

PyDoc_STRVAR(cbuffered_doc,
"The compiled core of flowpy.SubmissionPublisher: BufferedSubscription in C.\n\n"
"flowpy._buffered is the reference implementation; see flowpy.implementation.");

static struct PyModuleDef cbuffered_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flowpy._cbuffered",
    .m_doc = cbuffered_doc,
    .m_size = sizeof(cbuffered_state),
    .m_methods = cbuffered_functions,
    .m_slots = cbuffered_slots,
    .m_traverse = cbuffered_traverse,
    .m_clear = cbuffered_clear,
    .m_free = cbuffered_free,
};

PyMODINIT_FUNC
PyInit__cbuffered(void)
{
    return PyModuleDef_Init(&cbuffered_module);
}
