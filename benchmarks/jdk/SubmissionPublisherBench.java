import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Flow;
import java.util.concurrent.SubmissionPublisher;

/** The JDK's SubmissionPublisher, 1 producer to 1 no-op subscriber; prints the median items/s. */
public final class SubmissionPublisherBench {
    public static void main(String[] args) throws Exception {
        long items = Long.parseLong(args[0]);
        int repetitions = Integer.parseInt(args[1]);
        int capacity = Integer.parseInt(args[2]);
        run(items / 10, capacity); // warm-up for the JIT
        double[] rates = new double[repetitions];
        for (int r = 0; r < repetitions; r++) {
            rates[r] = run(items, capacity);
        }
        Arrays.sort(rates);
        System.out.println(rates[repetitions / 2]);
    }

    private static double run(long items, int capacity) throws InterruptedException {
        CountDownLatch done = new CountDownLatch(1);
        SubmissionPublisher<Long> publisher = new SubmissionPublisher<>(
                java.util.concurrent.ForkJoinPool.commonPool(), capacity);
        publisher.subscribe(new Flow.Subscriber<Long>() {
            public void onSubscribe(Flow.Subscription s) { s.request(Long.MAX_VALUE); }
            public void onNext(Long item) { }
            public void onError(Throwable error) { done.countDown(); }
            public void onComplete() { done.countDown(); }
        });
        long start = System.nanoTime();
        for (long i = 0; i < items; i++) {
            publisher.submit(i);
        }
        publisher.close();
        done.await();
        return items / ((System.nanoTime() - start) / 1e9);
    }
}
