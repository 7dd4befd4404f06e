import CCurl
import Glibc
import Logging
import PrefetchCore
import Synchronization

/// The loop thread's world: the multi handle, the admitted transfers and the admission queue.
///
/// Confined to the loop thread: created, used and destroyed there, never shared. libcurl's multi-socket interface
/// drives it: libcurl says which sockets to watch for what (`watch`, its socket callback) and when it next needs a
/// timeout call (its timer callback); the loop waits in `epoll_wait` on those sockets and its eventfd (the other
/// threads' wakeup), and hands each ready socket to `curl_multi_socket_action`. Waiting costs the same whatever the
/// number of connections (`curl_multi_poll` walked every socket on every wait).
final class TransferLoop {
    private let fetcher: Fetcher
    private let configuration: FetcherConfiguration
    private let multi: UnsafeMutableRawPointer
    /// Admitted transfers by easy handle address; keeps each `EasyTransfer` alive while curl may call back into it.
    private var active: [UInt: EasyTransfer] = [:]
    /// Admitted transfers by ticket, to serve cancellations.
    private var activeByTicket: [ObjectIdentifier: UInt] = [:]
    /// Tickets waiting for a free transfer slot, fairly across groups.
    private var queued = AdmissionQueue<FetchTicket>()
    /// Queued tickets to be sent once more on a new connection (see `retryOnFreshConnection`).
    private var freshConnection: Set<ObjectIdentifier> = []
    /// Easy handles of finished transfers, reset for the next ones.
    private let handles: EasyHandlePool
    /// Results of batch tickets fixed in this loop iteration, handed to their batches at its end (`flush`).
    private var outbox: [(batch: FetchBatch, completion: FetchCompletion)] = []
    /// Scratch for `flush`: one entry per batch with results in this iteration.
    private var byBatch: [(batch: FetchBatch, completions: [FetchCompletion])] = []
    /// The epoll set: libcurl's sockets and `wakeFD`.
    private let epollFD: Int32
    /// Written by other threads to wake the loop (`MultiWakeup`).
    private let wakeFD: Int32
    /// Sockets in the epoll set.
    private var watched: Set<Int32> = []
    /// When libcurl wants `curl_multi_socket_action` with `CURL_SOCKET_TIMEOUT` (its timer callback); nil: never.
    private var timerDeadline: ContinuousClock.Instant?
    /// Ready descriptors of one `epoll_wait`, and their `CURL_CSELECT_*` flags.
    private var readyFDs = [Int32](repeating: 0, count: 256)
    private var readyFlags = [Int32](repeating: 0, count: 256)

    init(fetcher: Fetcher) {
        self.fetcher = fetcher
        self.configuration = fetcher.configuration
        guard let multi = curl_multi_init() else {
            fatalError("curl_multi_init failed: out of memory")
        }
        self.multi = multi
        let maxTransfers = max(1, configuration.maxTransfers)
        self.handles = EasyHandlePool(capacity: maxTransfers, userAgent: configuration.userAgent)
        _ = prefetch_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, maxTransfers)
        _ = prefetch_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxTransfers)
        _ = prefetch_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.effectiveMaxConnectionsPerHost)
        _ = prefetch_multi_setopt_long(
            multi,
            CURLMOPT_PIPELINING,
            configuration.enableHTTP2 ? prefetch_pipe_multiplex() : prefetch_pipe_nothing()
        )
        epollFD = prefetch_epoll_create()
        wakeFD = prefetch_eventfd()
        guard epollFD >= 0, wakeFD >= 0 else {
            fatalError("the fetcher's loop could not create its epoll set or eventfd: errno \(errno)")
        }
        _ = prefetch_epoll_watch(epollFD, wakeFD, 1, 0, 1)
        let this = Unmanaged.passUnretained(self).toOpaque()
        _ = prefetch_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, this)
        _ = prefetch_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, this)
        _ = prefetch_multi_setopt_socket_function(multi) { _, socket, what, userp, _ in
            guard let userp else { return 0 }
            Unmanaged<TransferLoop>.fromOpaque(userp).takeUnretainedValue().watch(socket, what: what)
            return 0
        }
        _ = prefetch_multi_setopt_timer_function(multi) { _, milliseconds, userp in
            guard let userp else { return 0 }
            let loop = Unmanaged<TransferLoop>.fromOpaque(userp).takeUnretainedValue()
            loop.timerDeadline = milliseconds < 0 ? nil : ContinuousClock.now.advanced(by: .milliseconds(milliseconds))
            return 0
        }
    }

    deinit {
        // No callback into an object being destroyed: connections closed by the cleanup are not reported.
        _ = prefetch_multi_setopt_socket_function(multi, nil)
        _ = prefetch_multi_setopt_timer_function(multi, nil)
        curl_multi_cleanup(multi)
        close(epollFD)
        close(wakeFD)
    }

    // MARK: sockets and timers

    /// libcurl's socket callback: watch `socket` for what it asks (`CURL_POLL_IN`, `_OUT`, both), or stop.
    private func watch(_ socket: Int32, what: Int32) {
        if what == prefetch_poll_remove() {
            if watched.remove(socket) != nil { _ = prefetch_epoll_unwatch(epollFD, socket) }
            return
        }
        let readable: Int32 = what & prefetch_poll_in() != 0 ? 1 : 0
        let writable: Int32 = what & prefetch_poll_out() != 0 ? 1 : 0
        let known = watched.contains(socket)
        if prefetch_epoll_watch(epollFD, socket, readable, writable, known ? 0 : 1) != 0 {
            // A descriptor closed and reused behind libcurl's back (or added twice): the other operation fits.
            _ = prefetch_epoll_watch(epollFD, socket, readable, writable, known ? 1 : 0)
        }
        watched.insert(socket)
    }

    /// Runs libcurl's timeout work when its timer is due.
    private func driveTimer() {
        guard let deadline = timerDeadline, deadline <= .now else { return }
        timerDeadline = nil
        var running: Int32 = 0
        _ = prefetch_multi_socket_action(multi, prefetch_socket_timeout(), 0, &running)
    }

    /// Waits for a socket, a wakeup, libcurl's timer or a queued deadline, and hands every ready socket to libcurl.
    private func waitForEvents() {
        var timeout = pollTimeoutMilliseconds()
        if let deadline = timerDeadline {
            timeout = min(timeout, Int32(clamping: max(0, ContinuousClock.now.duration(to: deadline).wholeMillisecondsRoundedUp)))
        }
        let count = readyFDs.withUnsafeMutableBufferPointer { fds in
            readyFlags.withUnsafeMutableBufferPointer { flags in
                prefetch_epoll_wait(epollFD, fds.baseAddress, flags.baseAddress, Int32(fds.count), timeout)
            }
        }
        guard count > 0 else { return }
        for index in 0..<Int(count) {
            let socket = readyFDs[index]
            if socket == wakeFD {
                var drained: UInt64 = 0
                _ = withUnsafeMutableBytes(of: &drained) { read(wakeFD, $0.baseAddress, 8) }
                continue
            }
            var running: Int32 = 0
            _ = prefetch_multi_socket_action(multi, socket, readyFlags[index], &running)
        }
    }

    func run() {
        fetcher.mailbox.withLock { $0.wakeup = MultiWakeup(fd: wakeFD) }
        while true {
            let (submissions, cancellations, phase) = fetcher.mailbox.withLock { $0.take() }
            for ticket in submissions {
                if ticket.isFinished {
                    release()
                } else {
                    queued.append(ticket, group: ticket.request.group ?? "")
                }
            }
            for ticket in cancellations {
                remove(ticket)
            }
            if phase.loopMustAbort {
                abortAll()
                flush()
                break
            }
            expireQueued()
            admit()
            driveTimer()
            collectFinished()
            admit()
            flush()

            if phase.loopMayExitWhenIdle && active.isEmpty && queued.isEmpty {
                break
            }
            waitForEvents()
            collectFinished()
        }
        let leftovers = fetcher.mailbox.withLock { mailbox in
            mailbox.phase.loopExited()
            mailbox.wakeup = nil
            defer { mailbox.submissions.removeAll() }
            return mailbox.submissions
        }
        for ticket in leftovers {
            release()
            deliver(ticket, .failure(shutdownError(for: ticket)))
        }
        flush()
    }

    // MARK: delivery

    /// Fixes `ticket`'s result: a waiting caller is resumed now; a batch ticket's result waits in the outbox for
    /// the end of the iteration, so its batch hears of everything that finished together in one call.
    private func deliver(_ ticket: FetchTicket, _ result: Result<FetchResponse, FetchError>) {
        guard ticket.finish(result), let batch = ticket.batch else { return }
        Fetcher.notePinFailure(ticket, result)
        outbox.append((batch, FetchCompletion(index: ticket.index, result: result)))
    }

    /// Hands each batch the results fixed for it in this iteration, in one call per batch.
    private func flush() {
        guard !outbox.isEmpty else { return }
        if outbox.count == 1 || outbox.allSatisfy({ $0.batch === outbox[0].batch }) {
            let batch = outbox[0].batch
            let completions = outbox.map(\.completion)
            outbox.removeAll(keepingCapacity: true)
            batch.handler(completions)
            return
        }
        for (batch, completion) in outbox {
            if let at = byBatch.firstIndex(where: { $0.batch === batch }) {
                byBatch[at].completions.append(completion)
            } else {
                byBatch.append((batch, [completion]))
            }
        }
        outbox.removeAll(keepingCapacity: true)
        let ready = byBatch
        byBatch.removeAll(keepingCapacity: true)
        for (batch, completions) in ready {
            batch.handler(completions)
        }
    }

    // MARK: admission

    private func admit() {
        let limit = max(1, configuration.maxTransfers)
        while active.count < limit, let ticket = queued.popNext() {
            if ticket.isFinished {
                freshConnection.remove(ObjectIdentifier(ticket))
                release()
                continue
            }
            let remaining = ContinuousClock.now.duration(to: ticket.deadline)
            guard remaining > .zero else {
                freshConnection.remove(ObjectIdentifier(ticket))
                release()
                deliver(ticket, .failure(queuedTimeoutError(for: ticket)))
                continue
            }
            let transfer: EasyTransfer
            let fresh = freshConnection.remove(ObjectIdentifier(ticket)) != nil
            do {
                transfer = try EasyTransfer(
                    ticket: ticket, configuration: configuration, budget: fetcher.buffered, handles: handles, timeout: remaining,
                    freshConnection: fresh
                )
            } catch {
                release()
                deliver(ticket, .failure(error))
                continue
            }
            let key = UInt(bitPattern: transfer.handle)
            active[key] = transfer
            activeByTicket[ObjectIdentifier(ticket)] = key
            let added = curl_multi_add_handle(multi, transfer.handle)
            if added != CURLM_OK {
                active[key] = nil
                activeByTicket[ObjectIdentifier(ticket)] = nil
                let reason = String(cString: curl_multi_strerror(added))
                release()
                deliver(ticket, .failure(FetchError(code: .other, message: "\(reason) (host: \(ticket.request.hostForMessages))")))
            }
        }
    }

    private func expireQueued() {
        guard !queued.isEmpty else { return }
        let now = ContinuousClock.now
        queued.removeAll { ticket in
            if ticket.isFinished {
                freshConnection.remove(ObjectIdentifier(ticket))
                release()
                return true
            }
            if ticket.deadline <= now {
                freshConnection.remove(ObjectIdentifier(ticket))
                release()
                deliver(ticket, .failure(queuedTimeoutError(for: ticket)))
                return true
            }
            return false
        }
    }

    /// Longest wait for events as queued deadlines allow (`waitForEvents` shortens it further for libcurl's timer).
    private func pollTimeoutMilliseconds() -> Int32 {
        var timeout: Int64 = 1000
        if let earliest = queued.minimum(of: \.deadline) {
            let wait = ContinuousClock.now.duration(to: earliest)
            timeout = min(timeout, max(0, wait.wholeMillisecondsRoundedUp))
        }
        return Int32(timeout)
    }

    // MARK: completion

    private func collectFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            let code = prefetch_msg_result(message)
            let key = UInt(bitPattern: handle)
            guard let transfer = active.removeValue(forKey: key) else { continue }
            activeByTicket[ObjectIdentifier(transfer.ticket)] = nil
            curl_multi_remove_handle(multi, handle)
            if retryOnFreshConnection(transfer, code: code) { continue }
            let result = transfer.result(code: code)
            if case .failure(let error) = result {
                fetcher.logger.debug(
                    "fetch failed",
                    metadata: ["code": "\(error.code.rawValue)", "host": "\(transfer.ticket.request.hostForMessages)"]
                )
            }
            release()
            deliver(transfer.ticket, result)
        }
    }

    /// libcurl 7.88 (Debian 12) now and then fails a request on a reused HTTP/2 connection with "Error in the HTTP2
    /// framing layer" although the upstream sent nothing wrong (h2load, on the same upstream, sees no error in
    /// 20,000 multiplexed requests). A GET or HEAD that got no response byte is sent once more, on a new
    /// connection, within its original deadline; anything else, or a second failure, is reported as it was.
    private func retryOnFreshConnection(_ transfer: EasyTransfer, code: CURLcode) -> Bool {
        let ticket = transfer.ticket
        let method = ticket.request.method
        guard code == CURLE_HTTP2, method == "GET" || method == "HEAD", !transfer.receivedAnything, !transfer.freshConnection,
            !ticket.isFinished, ContinuousClock.now < ticket.deadline
        else { return false }
        fetcher.logger.debug(
            "retrying on a new connection after an HTTP/2 framing error", metadata: ["host": "\(ticket.request.hostForMessages)"])
        freshConnection.insert(ObjectIdentifier(ticket))
        queued.prepend(ticket, group: ticket.request.group ?? "")
        return true
    }

    private func remove(_ ticket: FetchTicket) {
        if let key = activeByTicket.removeValue(forKey: ObjectIdentifier(ticket)),
            let transfer = active.removeValue(forKey: key)
        {
            curl_multi_remove_handle(multi, transfer.handle)
            release()
        } else {
            var found = false
            queued.removeAll { queuedTicket in
                guard queuedTicket === ticket else { return false }
                found = true
                return true
            }
            if found {
                freshConnection.remove(ObjectIdentifier(ticket))
                release()
            }
        }
    }

    private func abortAll() {
        for transfer in active.values {
            curl_multi_remove_handle(multi, transfer.handle)
            release()
            deliver(transfer.ticket, .failure(shutdownError(for: transfer.ticket)))
        }
        active.removeAll()
        activeByTicket.removeAll()
        freshConnection.removeAll()
        for ticket in queued.drain() {
            release()
            deliver(ticket, .failure(shutdownError(for: ticket)))
        }
    }

    /// One ticket fewer in flight. Called before the ticket's result is delivered, so a caller that sees its
    /// result also sees the count without it.
    private func release() {
        fetcher.inFlightCount.subtract(1, ordering: .relaxed)
    }

    private func shutdownError(for ticket: FetchTicket) -> FetchError {
        FetchError(code: .shutdown, message: "fetcher shut down before the transfer finished (host: \(ticket.request.hostForMessages))")
    }

    private func queuedTimeoutError(for ticket: FetchTicket) -> FetchError {
        FetchError(
            code: .timeout,
            message: "timed out after \(ticket.request.timeout) waiting for a transfer slot (host: \(ticket.request.hostForMessages))"
        )
    }
}
