// The fetcher: upstream HTTP through libcurl's multi interface. One multi handle (one connection cache, one DNS
// cache) and every easy handle live on one dedicated loop thread started by `run()`; callers post tickets to a
// mailbox and wake the loop through its eventfd. A page open submits all its requests in one post and gets their
// results in batches, once per loop iteration, on the loop thread (`submit(_:onCompletion:)`); a single `fetch` waits
// on a continuation.
// Design notes: docs/design/fetcher.md
import CCurl
import Foundation
import Glibc
public import Logging
import PrefetchCore
public import ServiceLifecycle
import Synchronization

/// `curl_global_init`, run exactly once per process (Swift initialises globals lazily and atomically).
let curlGlobalInitialisation: CURLcode = curl_global_init(prefetch_global_all())

/// How other threads wake the loop thread: a write to its eventfd, which the loop's epoll set watches.
struct MultiWakeup: Sendable {
    let fd: Int32

    func wake() {
        var one: UInt64 = 1
        _ = withUnsafeBytes(of: &one) { write(fd, $0.baseAddress, 8) }
    }
}

/// What callers hand to the loop thread; guarded by the fetcher's mutex.
struct Mailbox {
    var phase = FetcherPhase()
    var submissions: [FetchTicket] = []
    var cancellations: [FetchTicket] = []
    /// Set while the loop thread runs; wakeups are sent under the lock so the eventfd cannot be closed
    /// concurrently.
    var wakeup: MultiWakeup?
    /// A wakeup was sent since the loop last took the mailbox: the loop takes it again before it next waits, so a
    /// later post needs no write of its own. Under load, many page opens post between two turns of the loop and
    /// one write wakes it for all of them.
    var wakePending = false

    /// Wakes the loop unless a wakeup is already on its way (``wakePending``).
    mutating func wake() {
        guard !wakePending, let wakeup else { return }
        wakePending = true
        wakeup.wake()
    }

    /// The loop takes what was posted: the next post wakes it again.
    mutating func take() -> (submissions: [FetchTicket], cancellations: [FetchTicket], phase: FetcherPhase) {
        defer {
            submissions.removeAll(keepingCapacity: true)
            cancellations.removeAll(keepingCapacity: true)
        }
        wakePending = false
        return (submissions, cancellations, phase)
    }
}

/// An HTTP client for composed upstream requests, driven by libcurl's multi interface on one loop thread.
///
/// Run it as a `Service` (its `run()` drives the loop); `fetch` may be called from any task, before or while it
/// runs.
public final class Fetcher: Service, Sendable {
    let configuration: FetcherConfiguration
    let logger: Logger
    let mailbox = Mutex(Mailbox())
    let inFlightCount = Atomic<Int>(0)
    let buffered: BufferBudget

    /// Creates a fetcher. Nothing is started until `run()`.
    public init(configuration: FetcherConfiguration = .init(), logger: Logger) {
        _ = curlGlobalInitialisation
        self.configuration = configuration
        self.logger = logger
        self.buffered = BufferBudget(limit: configuration.maxBufferedBytes)
    }

    /// Bytes held by response bodies still arriving (bounded by `maxBufferedBytes`).
    public var bufferedBytes: Int {
        buffered.current
    }

    /// Transfers submitted and not yet finished (queued or in progress), for a gauge.
    public var inFlight: Int {
        inFlightCount.load(ordering: .relaxed)
    }

    /// Drives the loop thread until graceful shutdown or cancellation.
    ///
    /// On graceful shutdown new fetches are refused with `.shutdown` while in-flight ones finish (each bounded by
    /// its own timeout); then `run()` returns. On task cancellation everything in flight fails with `.shutdown`
    /// at once. Throws if called a second time.
    public func run() async throws {
        let started = mailbox.withLock { $0.phase.start() }
        guard started else {
            throw FetchError(code: .other, message: "Fetcher.run() was called more than once")
        }
        logger.debug(
            "fetcher starting",
            metadata: [
                "max_transfers": "\(configuration.maxTransfers)",
                "max_connections_per_host": "\(configuration.effectiveMaxConnectionsPerHost)",
            ]
        )
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    let name = configuration.threadName
                    let thread = Thread { [self] in
                        // Named from inside: Foundation's `Thread.name` set before `start()` does not reach the
                        // kernel's name on Linux, so the thread kept its creator's (a Dispatch worker's) and tools
                        // that count by thread (top -H, perf, bench/fanout.sh) could not tell it apart.
                        _ = prefetch_name_this_thread(name)
                        TransferLoop(fetcher: self).run()
                        done.resume()
                    }
                    thread.name = name
                    thread.start()
                }
            } onGracefulShutdown: {
                self.requestStop(abort: false)
            }
        } onCancel: {
            self.requestStop(abort: true)
        }
        logger.debug("fetcher stopped")
    }

    /// Fetches one request.
    ///
    /// Requests submitted before `run()` starts are queued until it does. Cancelling the calling task removes the
    /// transfer and throws `.cancelled`; after shutdown this throws `.shutdown`.
    public func fetch(_ request: FetchRequest) async throws(FetchError) -> FetchResponse {
        var pin: AddressPin?
        if let pinning = request.pinning, let url = try? HTTPURL(parsing: request.url) {
            pin = pinning.pin(host: url.host, port: url.effectivePort)
        }
        let ticket = FetchTicket(request: request, pin: pin)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: FetchTicket.Continuation) in
                if ticket.install(continuation) {
                    submit(ticket)
                }
            }
        } onCancel: {
            let error = FetchError(code: .cancelled, message: "fetch cancelled by caller (host: \(request.hostForMessages))")
            if ticket.finish(.failure(error)) {
                cancel(ticket)
            }
        }
        if case .failure(let error) = result, error.code == .connect, let pin {
            // The pinned address refused: the provider decides what to do (the resolver hands the host back to
            // libcurl's own resolution until its next lookup).
            request.pinning?.connectFailed(pin)
        }
        return try result.get()
    }

    /// Submits `requests` together (one page open's): one post to the loop and one wakeup, whatever their number.
    ///
    /// `onCompletion` gets every result exactly once, by index into `requests`, in batches: once per loop iteration
    /// in which any of them finished, on the loop thread, so it must not block (hand the results over and return).
    /// When the fetcher has shut down it is called at once, on the caller's thread, with `.shutdown` for all. A
    /// batch is not cancelled by its caller: each request is bounded by its own timeout, and an aborting shutdown
    /// fails what is left with `.shutdown`.
    public func submit(_ requests: [FetchRequest], onCompletion: @escaping @Sendable ([FetchCompletion]) -> Void) {
        guard !requests.isEmpty else { return }
        let batch = FetchBatch(handler: onCompletion)
        let now = ContinuousClock.now
        var tickets: [FetchTicket] = []
        tickets.reserveCapacity(requests.count)
        for (index, request) in requests.enumerated() {
            var pin: AddressPin?
            if let pinning = request.pinning, let url = try? HTTPURL(parsing: request.url) {
                pin = pinning.pin(host: url.host, port: url.effectivePort)
            }
            tickets.append(FetchTicket(request: request, pin: pin, now: now, batch: batch, index: index))
        }
        let accepted = mailbox.withLock { mailbox in
            guard mailbox.phase.acceptsSubmissions else { return false }
            mailbox.submissions.append(contentsOf: tickets)
            inFlightCount.add(tickets.count, ordering: .relaxed)
            mailbox.wake()
            return true
        }
        if !accepted {
            onCompletion(
                tickets.map { ticket in
                    ticket.finish(.failure(Self.shutdownError(ticket)))
                    return FetchCompletion(index: ticket.index, result: .failure(Self.shutdownError(ticket)))
                })
        }
    }

    /// A connection to a pinned address failed: the provider decides what to do (the resolver hands the host back
    /// to libcurl's own resolution until its next lookup). Called on the loop thread for batch requests.
    static func notePinFailure(_ ticket: FetchTicket, _ result: Result<FetchResponse, FetchError>) {
        if case .failure(let error) = result, error.code == .connect, let pin = ticket.pin {
            ticket.request.pinning?.connectFailed(pin)
        }
    }

    static func shutdownError(_ ticket: FetchTicket) -> FetchError {
        FetchError(code: .shutdown, message: "fetcher is shut down (host: \(ticket.request.hostForMessages))")
    }

    private func submit(_ ticket: FetchTicket) {
        let accepted = mailbox.withLock { mailbox in
            guard mailbox.phase.acceptsSubmissions else { return false }
            mailbox.submissions.append(ticket)
            inFlightCount.add(1, ordering: .relaxed)
            mailbox.wake()
            return true
        }
        if !accepted {
            ticket.finish(.failure(Self.shutdownError(ticket)))
        }
    }

    private func cancel(_ ticket: FetchTicket) {
        mailbox.withLock { mailbox in
            guard mailbox.phase.state != .stopped else { return }
            mailbox.cancellations.append(ticket)
            mailbox.wake()
        }
    }

    private func requestStop(abort: Bool) {
        mailbox.withLock { mailbox in
            if abort {
                mailbox.phase.requestAbort()
            } else {
                mailbox.phase.requestDrain()
            }
            mailbox.wake()
        }
    }
}

extension FetchRequest {
    /// The URL's host and explicit port for error messages and logs (never the user info, path or query, which may
    /// carry user data).
    var hostForMessages: String {
        guard let parsed = try? HTTPURL(parsing: url) else { return "not an http(s) URL" }
        return parsed.port.map { "\(parsed.host):\($0)" } ?? parsed.host
    }
}
