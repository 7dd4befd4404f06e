import CoreMetrics
import HTTPTypes
import Logging
import NIOCore
import PrefetchCore
import PrefetchFetcher
import PrefetchStore
import Synchronization
import Tracing

/// One page open's upstream requests as one unit of work.
///
/// The trigger hands every leader of the page to the fetcher in one post (`Fetcher.submit(_:onCompletion:)`: one
/// wakeup of the curl loop whatever the interface count). The curl loop calls ``finished(_:of:)`` once per loop
/// iteration with every result of that iteration, on its own thread, and that call does what a fetch's result
/// asks: it posts the answer for this page open's dependents, records the timing, counts the metrics, and
/// settles every flight of the batch in the store together (`ResponseStore.settle(_:then:)`: one lock acquisition
/// in the in-process store, whose readers are resumed from there; one pipelined round trip to Redis, handled on the
/// Redis connection's event loop). A dependent whose answers all come from this page open's own leaders (within its own
/// deadline) is composed and sent from the same call once the last of them is in. No task, continuation or
/// stream element exists per upstream request.
///
/// Only a dependent that needs an answer another page open is fetching, or a stored one, or one whose request
/// may outlast the dependent's deadline, waits in a task of its own (``runDependent(_:)``), because that wait
/// needs the store or a timer; it then sends its request through this unit like any other.
///
/// The unit is live on the runner (`FetchRunner.enter`/`leave`) from the trigger until its last flight is
/// settled, so a graceful shutdown drains it before the store and the fetcher stop.
/// Design notes: docs/design/dependent-requests.md, docs/ARCHITECTURE.md ("One page open of 8 interfaces").
final class PageOpen: Sendable {
    /// A request of this page open that leads its flight.
    struct Flight: Sendable {
        var key: StoreKey
        var token: FlightToken
        var policy: StorePolicy
        var label: String
        /// The trigger's instant plus the interface's timeout: every wait and fetch of the request ends by then.
        var deadline: ContinuousClock.Instant
    }

    /// A request handed to the fetcher, until its result is in.
    private struct InFlight: Sendable {
        /// The request carries the caller's credentials.
        var sentCredentials: Bool
        /// The request was made from an answer kept for this page open alone.
        var ownOnly: Bool
        var span: (any Span)?
    }

    /// One request ready to be sent.
    struct Send: Sendable {
        var index: Int
        var request: UpstreamRequest
        var ownOnly = false
    }

    private struct State: Sendable {
        var inFlight: [Int: InFlight] = [:]
        /// Dependents sent from completions, not yet sent or failed.
        var waiting: Set<Int> = []
        /// Answers those dependents still need, and how many of them still need each.
        var answers: [Int: DependencyAnswer] = [:]
        var consumers: [Int: Int] = [:]
        /// Flights of this page open not yet settled; the unit leaves the runner when none is left.
        var unsettled: Int
        /// Flights settled without an answer the page can use (a failure, or a status that is not 2xx).
        var failed = 0
    }

    let orchestrator: Orchestrator
    let ticket: Ticket
    let plan: Plan
    let credentials: Credentials
    let trace: (parent: TraceParent, state: String?)?
    let context: ServiceContext
    /// The leaders of this page open by request index (nil: joined or fresh, nothing to send).
    let flights: [Flight?]
    private let state: Mutex<State>

    /// A unit for `flights` (already live on the runner). `completionDependents`: the dependents sent from
    /// completions (see the type's notes); every other leading dependent is run by ``runDependent(_:)``.
    init(
        orchestrator: Orchestrator, ticket: Ticket, plan: Plan, credentials: Credentials, trace: (parent: TraceParent, state: String?)?,
        context: ServiceContext, flights: [Flight?], completionDependents: Set<Int>
    ) {
        self.orchestrator = orchestrator
        self.ticket = ticket
        self.plan = plan
        self.credentials = credentials
        self.trace = trace
        self.context = context
        self.flights = flights
        var initial = State(unsettled: flights.reduce(0) { $0 + ($1 == nil ? 0 : 1) })
        initial.waiting = completionDependents
        for dependent in completionDependents {
            for input in plan.requests[dependent].dependencies { initial.consumers[input, default: 0] += 1 }
        }
        state = Mutex(initial)
    }

    /// Whether dependent `index` can be sent from completions: every answer it needs comes from a leader of this
    /// page open whose own deadline is not later than the dependent's, so its wait ends without a timer of its own.
    static func sendsFromCompletions(_ index: Int, plan: Plan, flights: [Flight?]) -> Bool {
        guard let own = flights[index] else { return false }
        return plan.requests[index].dependencies.allSatisfy { input in
            guard let needed = flights[input] else { return false }
            return needed.deadline <= own.deadline
        }
    }

    // MARK: Sending

    /// Hands `sends` to the fetcher in one post, each in a client span of the trigger's trace.
    func send(_ sends: [Send]) {
        guard !sends.isEmpty else { return }
        let now = orchestrator.clock.now
        var requests: [FetchRequest] = []
        requests.reserveCapacity(sends.count)
        var indices: [Int] = []
        indices.reserveCapacity(sends.count)
        var started: [(Int, InFlight)] = []
        started.reserveCapacity(sends.count)
        for send in sends {
            var request = send.request
            let span = Self.startSpan(orchestrator.tracer, for: &request, label: flights[send.index]?.label ?? "", context: context)
            requests.append(request.fetch)
            indices.append(send.index)
            started.append((send.index, InFlight(sentCredentials: request.sendsCredentials, ownOnly: send.ownOnly, span: span)))
        }
        state.withLock { state in
            for (index, flight) in started { state.inFlight[index] = flight }
        }
        ticket.timings.withLock { timings in
            for index in indices { timings[index].startedAt = now }
        }
        orchestrator.fetcher.submit(requests) { [self, indices] completions in
            finished(completions, of: indices)
        }
        orchestrator.metrics.inFlight.record(orchestrator.fetcher.inFlight)
    }

    /// Starts the request's span and injects its context into the request as the tracer propagates it. The span of a
    /// shared flight (its entry readable by others) starts a new trace of the service's own, linked to the page
    /// open's span: the caller's trace context never reaches an upstream whose answer others read.
    private static func startSpan<T: Tracer>(
        _ tracer: T, for request: inout UpstreamRequest, label: String, context: ServiceContext
    )
        -> any Span
    {
        let span: any Span
        if request.isShared {
            span = tracer.startSpan("prefetch \(label)", context: .topLevel, ofKind: .client)
            span.addLink(SpanLink(context: context, attributes: [:]))
        } else {
            span = tracer.startSpan("prefetch \(label)", context: context, ofKind: .client)
        }
        // A span that records nothing (no tracer bootstrapped) gets no attributes: each would build a dictionary.
        if span.isRecording {
            span.attributes["http.request.method"] = request.fetch.method
            span.attributes["prefetch.interface"] = label
        }
        request.inject(span, with: tracer)
        return span
    }

    /// Ends an upstream request's span with what came back: the upstream's status, or the failure code.
    private static func end(_ span: any Span, with result: Result<FetchResponse, FetchError>) {
        guard span.isRecording else { return span.end() }
        switch result {
        case .success(let response):
            span.attributes["http.response.status_code"] = response.status
            if response.status >= 500 { span.setStatus(SpanStatus(code: .error)) }
        case .failure(let error):
            span.attributes["prefetch.failure"] = error.code.rawValue
            span.setStatus(SpanStatus(code: .error, message: error.code.rawValue))
        }
        span.end()
    }

    // MARK: Completions

    /// Results from the fetcher's loop thread, once per loop iteration: `completions` index into `indices`, the
    /// request indices of the batch they were sent in. Must not block.
    func finished(_ completions: [FetchCompletion], of indices: [Int]) {
        var settlements: [Settlement] = []
        var posted: [(Int, DependencyAnswer)] = []
        var ownCopies: [Int] = []
        for completion in completions {
            let index = indices[completion.index]
            guard let sent = state.withLock({ $0.inFlight.removeValue(forKey: index) }), let flight = flights[index] else { continue }
            if let span = sent.span { Self.end(span, with: completion.result) }
            posted.append(
                (index, settle(flight, index: index, sent: sent, result: completion.result, into: &settlements, ownCopies: &ownCopies)))
        }
        orchestrator.metrics.inFlight.record(orchestrator.fetcher.inFlight)
        let failed = posted.reduce(0) { count, item in
            if case .failed = item.1 { return count + 1 }
            return count
        }
        post(posted)
        commit(settlements, flights: posted.count, failed: failed, ownCopies: ownCopies)
    }

    /// What one result asks of the store (appended to `settlements`; `index` to `ownCopies` when the page open keeps
    /// its own copy), the ticket, the metrics and the log; returns the answer this page open's dependents get.
    private func settle(
        _ flight: Flight, index: Int, sent: InFlight, result: Result<FetchResponse, FetchError>, into settlements: inout [Settlement],
        ownCopies: inout [Int]
    ) -> DependencyAnswer {
        let metrics = orchestrator.metrics
        let logger = orchestrator.logger
        let clock = orchestrator.clock
        let label = flight.label
        switch result {
        case .success(let response):
            let cacheControl = response.headers[values: .cacheControl].map { $0.lowercased() }
            let setsCookie = response.headers.contains { $0.name == .setCookie || $0.name.canonicalName == "set-cookie2" }
            let isPrivate = cacheControl.contains { $0.contains("private") }
            // RFC 9111 §3.5 and Varnish's builtin.vcl: a response fetched without the caller's credentials that sets a
            // cookie (a guest session of this page open), or says it is private, is not shared, whatever identity its
            // key carries; neither is one made from such an answer.
            // The caller's credentials, not the headers as sent: a config may set its own static `Authorization`.
            // A refusal of the request itself (400, 413, 431, ...) says nothing of what another caller's request would
            // get: it is this page open's alone, whoever else the key covers.
            let refused = orchestrator.settings.unsharedStatuses.contains(response.status)
            let keptOwn = sent.ownOnly || refused || (!sent.sentCredentials && (setsCookie || isPrivate))
            // What this page open's dependents get: a 2xx answer's body, else the failure (before the store hears
            // of it, so a dependent never waits on a round trip to a shared store).
            let answer: DependencyAnswer =
                (200..<300).contains(response.status)
                ? .body(response.bodyBuffer, ownOnly: keptOwn) : .failed("upstream answered \(response.status)")
            // The upstream's headers (never one claiming to be ours, nor a `Set-Cookie` line a shell would read as two:
            // ``SetCookieLines``), then how it was fetched: a shell copies a replay's
            // `Set-Cookie` into the webview only from a request that carried the user's credentials, as a browser
            // stores no cookie from a credentialless one.
            var headers = HTTPFields()
            headers.reserveCapacity(response.headers.count + 1)
            for field in response.headers
            where !Orchestrator.hopByHop.contains(field.name.canonicalName) && field.name != .prefetchCredentials
                && SetCookieLines.replayable(field)
            {
                headers.append(field)
            }
            headers.append(HTTPField(name: .prefetchCredentials, value: sent.sentCredentials ? "sent" : "omitted"))
            let noStore = cacheControl.contains { $0.contains("no-store") }
            let now = clock.now
            ticket.record(index) {
                $0.finishedAt = now
                $0.status = response.status
                $0.bytes = response.bodyBuffer.readableBytes
            }
            metrics.upstreamDuration(label, response.elapsed)
            metrics.upstreamQueued(label, response.queued)
            if response.status >= 500 {
                // A prefetched 5xx is worth nothing to the page: it is a failure the page retries itself, and is
                // kept only for the negative TTL.
                let failure = StoreFailure(code: .upstream5xx, message: "the upstream answered \(response.status)")
                settlements.append(.complete(flight.key, token: flight.token, result: .failure(failure)))
                metrics.fetch(label, outcome: failure.code.rawValue)
                ticket.record(index) { $0.error = failure.code }
                logger.info(
                    "fetch failed", metadata: ["interface": "\(label)", "error": "\(failure.code)", "status": "\(response.status)"])
                return answer
            }
            let stored = StoredResponse(
                status: response.status, headers: headers, bodyBuffer: response.bodyBuffer, fetchedAt: now, noStore: noStore,
                elapsed: response.elapsed)
            if keptOwn {
                // It goes to the ticket that fetched it; everyone else on the shared key gets a miss.
                settlements.append(
                    .put(orchestrator.privateKey(flight.key, ticket: ticket.id), policy: flight.policy, result: .success(stored)))
                ownCopies.append(index)
                let why =
                    sent.ownOnly
                    ? "was made from an answer private to its page open"
                    : refused
                        ? "refuses the request itself (\(response.status))" : setsCookie ? "sets a cookie" : "is Cache-Control: private"
                let failure = StoreFailure(
                    code: FailureCode.private, message: "the response \(why); only the page open that fetched it may read it")
                settlements.append(.complete(flight.key, token: flight.token, result: .failure(failure)))
                metrics.fetch(label, outcome: FailureCode.private.rawValue)
                logger.debug("fetch completed, kept private", metadata: ["interface": "\(label)", "status": "\(response.status)"])
                return answer
            }
            settlements.append(.complete(flight.key, token: flight.token, result: .success(stored)))
            metrics.fetch(label, outcome: "ok")
            logger.debug(
                "fetch completed",
                metadata: [
                    "interface": "\(label)", "status": "\(response.status)", "bytes": "\(response.bodyBuffer.readableBytes)",
                    "ms": "\(response.elapsed.milliseconds)",
                ])
            return answer
        case .failure(let error):
            if error.code == .cancelled {
                settlements.append(.abandon(flight.key, token: flight.token))
            } else {
                settlements.append(
                    .complete(
                        flight.key, token: flight.token, result: .failure(StoreFailure(code: error.code, message: error.message))))
            }
            metrics.fetch(label, outcome: error.code.rawValue)
            let now = clock.now
            ticket.record(index) {
                $0.finishedAt = now
                $0.error = error.code
            }
            logger.info(
                "fetch failed", metadata: ["interface": "\(label)", "error": "\(error.code.rawValue)", "message": "\(error.message)"])
            return .failed(error.code.rawValue)
        }
    }

    /// Hands `settlements` to the store, then counts `flights` flights of this page open settled. The ticket learns
    /// of the copies it keeps for itself (`ownCopies`) once they are in the store, not before: a reader told to read
    /// the page open's own copy must find it there.
    private func commit(_ settlements: [Settlement], flights count: Int, failed: Int, ownCopies: [Int] = []) {
        guard !settlements.isEmpty else { return settled(count, failed: failed) }
        let ticket = ticket
        orchestrator.store.settle(settlements) { [self] in
            for index in ownCopies { ticket.record(index) { $0.keptPrivate = true } }
            settled(count, failed: failed)
        }
    }

    /// Counts `count` flights of this page open settled, `failed` of them without a usable answer; the unit leaves
    /// the runner with its last (a graceful shutdown waits for it, so a shared store's settlements are in before the
    /// store stops), after the page open's one `info` line. Each request's own line is at `debug` (a failure's at
    /// `info`): a line per upstream request cost about a tenth of the service's CPU per request in the fan-out
    /// benchmark (BENCHMARKS.md), a line per page open an eighth of that.
    private func settled(_ count: Int, failed: Int) {
        guard count > 0 else { return }
        let (done, failures) = state.withLock { state in
            state.unsettled -= count
            state.failed += failed
            return (state.unsettled == 0, state.failed)
        }
        guard done else { return }
        orchestrator.logger.info(
            "page open settled",
            metadata: [
                "requests": "\(flights.count)", "failed": "\(failures)",
                "ms": "\(ticket.createdAt.duration(to: orchestrator.clock.now).milliseconds)",
            ])
        orchestrator.runner.leave()
    }

    // MARK: Dependents

    /// Posts answers of this page open's requests: to the ticket's board (dependents waiting in tasks) and to the
    /// dependents sent from completions, each of which is sent once every answer it needs is in, or fails at once
    /// when one of them failed (which is an answer for the dependents that need it in turn).
    func post(_ posted: [(Int, DependencyAnswer)]) {
        var work = posted[...]
        var sends: [Send] = []
        while let (index, answer) = work.popFirst() {
            ticket.answers.post(index, answer)
            let ready: [(dependent: Int, answers: [Int: DependencyAnswer])] = state.withLock { state in
                guard state.consumers[index, default: 0] > 0 else { return [] }
                state.answers[index] = answer
                var ready: [(Int, [Int: DependencyAnswer])] = []
                for dependent in state.waiting.sorted() where plan.requests[dependent].dependencies.contains(index) {
                    let inputs = plan.requests[dependent].dependencies
                    let failed = inputs.contains { if case .failed = state.answers[$0] { true } else { false } }
                    guard failed || inputs.allSatisfy({ state.answers[$0] != nil }) else { continue }
                    state.waiting.remove(dependent)
                    var taken: [Int: DependencyAnswer] = [:]
                    for input in inputs {
                        if let answer = state.answers[input] { taken[input] = answer }
                        let left = state.consumers[input, default: 1] - 1
                        state.consumers[input] = left
                        if left <= 0 { state.answers[input] = nil }
                    }
                    ready.append((dependent, taken))
                }
                return ready
            }
            for (dependent, answers) in ready {
                do throws(DependencyError) {
                    sends.append(try compose(dependent, answers: answers))
                } catch {
                    fail(dependent, error)
                    work.append((dependent, .failed(error.code.rawValue)))
                }
            }
        }
        send(sends)
    }

    /// Dependent `index`'s request composed from the answers it needs (request index to answer), in the order
    /// its references name them.
    private func compose(_ index: Int, answers: [Int: DependencyAnswer]) throws(DependencyError) -> Send {
        let planned = plan.requests[index]
        let label = ticket.requests[index].name
        var bodies: [(input: Int, body: ByteBuffer, ownOnly: Bool)] = []
        for input in planned.dependencies {
            let needed = ticket.requests[input].name
            switch answers[input] {
            case .body(let body, let ownOnly): bodies.append((input, body, ownOnly))
            case .failed(let code):
                throw DependencyError(code: .dependencyFailed, message: "\(label) needs \(needed), which failed (\(code))")
            case nil:
                throw DependencyError(code: .dependencyFailed, message: "\(label) needs \(needed), which was not in before its deadline")
            }
        }
        if let flight = flights[index], orchestrator.clock.now >= flight.deadline, let first = planned.dependencies.first {
            throw DependencyError(
                code: .dependencyFailed,
                message: "\(label) needs \(ticket.requests[first].name), which was not in before its deadline")
        }
        return try resolve(index, bodies: bodies)
    }

    /// Dependent `index`'s request with the values its references take from `bodies`, ready to send.
    private func resolve(_ index: Int, bodies: [(input: Int, body: ByteBuffer, ownOnly: Bool)]) throws(DependencyError) -> Send {
        let planned = plan.requests[index]
        let label = ticket.requests[index].name
        var ownOnly = false
        var values: [Reference: JSONValue] = [:]
        for (input, body, isOwn) in bodies {
            let needed = ticket.requests[input].name
            ownOnly = ownOnly || isOwn
            guard let document = body.withUnsafeReadableBytes({ try? JSONParser.parse($0) }) else {
                throw DependencyError(
                    code: .dependencyNotJSON, message: "\(label) needs values from \(needed), whose answer is not JSON")
            }
            for reference in planned.interface.references where reference.interface == needed {
                if let value = reference.pointer.resolve(in: document) { values[reference] = value }
            }
        }
        let resolved = try planned.resolved(with: values)
        let sends = orchestrator.sendsCredentials(resolved, page: plan.pageURL, credentials: credentials)
        // The key was made from the dependent's form as written; should the form as sent decide otherwise about the
        // credentials, nothing is sent (a request never carries what its key does not cover).
        if sends && ticket.requests[index].key.identity != credentials.identity {
            throw DependencyError(code: .dependencyValue, message: "\(label)'s credentials differ from what its key covers")
        }
        let deadline = flights[index]?.deadline ?? orchestrator.clock.now
        let remaining = max(.milliseconds(1), orchestrator.clock.now.duration(to: deadline))
        // Keyed by the dependent's form as written and the keys of the answers it took values from: its key is the
        // ticket's (the caller's identity when any of those answers was, whatever its own credentials rule says).
        let request = orchestrator.upstreamRequest(
            resolved, key: ticket.requests[index].key,
            credentials: sends ? credentials : nil, page: plan.pageURL, trace: trace, timeout: remaining,
            group: ticket.id)
        return Send(index: index, request: request, ownOnly: ownOnly)
    }

    /// Dependent `index` is not sent: its flight fails with `error`'s code.
    private func fail(_ index: Int, _ error: DependencyError) {
        guard let flight = flights[index] else { return }
        let failure = StoreFailure(code: error.code, message: error.message)
        orchestrator.metrics.fetch(flight.label, outcome: error.code.rawValue)
        let now = orchestrator.clock.now
        ticket.record(index) {
            $0.finishedAt = now
            $0.error = error.code
        }
        orchestrator.logger.info(
            "dependent request not sent",
            metadata: ["interface": "\(flight.label)", "error": "\(error.code)", "message": "\(error.message)"])
        commit([.complete(flight.key, token: flight.token, result: .failure(failure))], flights: 1, failed: 1)
    }

    /// Runs a leading dependent that cannot be sent from completions: waits for each answer it needs (this page
    /// open's own, or another's flight or a stored entry through the store) within its deadline, then sends its
    /// request through this unit. A needed answer that failed, is not JSON, or lacks a value fails it with a
    /// `dependency-*` code naming what was missing; nothing is sent then.
    func runDependent(_ index: Int) async {
        guard let flight = flights[index] else { return }
        let planned = plan.requests[index]
        do throws(DependencyError) {
            var bodies: [(input: Int, body: ByteBuffer, ownOnly: Bool)] = []
            for dependency in planned.dependencies {
                let (body, isOwn) = try await orchestrator.answer(of: dependency, in: ticket, for: flight.label, until: flight.deadline)
                bodies.append((dependency, body, isOwn))
            }
            send([try resolve(index, bodies: bodies)])
        } catch {
            fail(index, error)
            post([(index, .failed(error.code.rawValue))])
        }
    }

    /// The service is shutting down and refused this page open: every flight fails at once. Returns the
    /// settlements for the store.
    func refuse() -> [Settlement] {
        let now = orchestrator.clock.now
        var settlements: [Settlement] = []
        for (index, flight) in flights.enumerated() {
            guard let flight else { continue }
            settlements.append(
                .complete(
                    flight.key, token: flight.token,
                    result: .failure(StoreFailure(code: .shutdown, message: "the service is shutting down"))))
            ticket.record(index) {
                $0.finishedAt = now
                $0.error = .shutdown
            }
            ticket.answers.post(index, .failed(FailureCode.shutdown.rawValue))
        }
        return settlements
    }
}
