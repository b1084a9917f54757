"""ManualPublisher, the fake upstream of the subscriber verifications."""

from __future__ import annotations

import gc
import threading
import weakref

from flowpy import flow
from flowpy.tck.environment import TestEnvironment
from flowpy.tck.manual_publisher import ManualPublisher
from flowpy.tck.subscribers import ManualSubscriber, ManualSubscriberWithSubscriptionSupport


def test_it_records_requests_and_the_cancel_of_its_one_subscriber() -> None:
    env = TestEnvironment(100, 20)
    publisher: ManualPublisher[int] = ManualPublisher(env)
    subscriber: ManualSubscriberWithSubscriptionSupport[int] = ManualSubscriberWithSubscriptionSupport(env)
    publisher.subscribe(subscriber)
    subscription = subscriber.subscription.value()
    subscription.request(3)
    assert publisher.requests.next(100, "a request") == 3
    assert repr(subscription) == f"ManualPublisher.Subscription({publisher!r})"
    subscription.cancel()
    publisher.cancelled.expect_close("the cancel")
    publisher.send_next(7)
    assert subscriber.next_element(100) == 7
    env.verify_no_async_errors_no_delay()


def test_it_and_its_subscriber_are_freed_once_threads_have_started() -> None:
    # CPython 3.13t never frees a class made once a thread has started: a class
    # made per publisher, its methods closing over it, kept every publisher.
    started = threading.Thread(target=lambda: None)
    started.start()
    started.join()
    env = TestEnvironment(100, 20)
    publisher: ManualPublisher[int] = ManualPublisher(env)
    subscriber: flow.Subscriber[int] = ManualSubscriber(env)
    publisher.subscribe(subscriber)
    freed = [weakref.ref(publisher), weakref.ref(subscriber)]
    del publisher, subscriber
    gc.collect()
    assert [ref() for ref in freed] == [None, None]
