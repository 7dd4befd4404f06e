package import HTTPTypes
package import PrefetchCore
package import PrefetchEngine
package import PrefetchStore

// Page rules that several routes of the page API apply (`FastHandoff`, `PageAPI`), one
// function each: the origin guard and the headers it adds, where a browser says a request comes from, and a data
// read's answer with its bookkeeping, and a ticket's entitlement (`PrefetchRoutes.entitledTicket`, over the engine's
// `Orchestrator.entitle`). Interface selection and the `wait` parameter are `PrefetchRoutes.select(_:query:)` and
// `PrefetchRoutes.wait(_:default:orchestrator:)`.

extension AllowedOrigins {
    /// A request the origin guard let through: its `Origin` (nil without one) and what that origin was granted.
    package struct Admission: Sendable, Equatable {
        package var origin: String?
        package var grant: Grant

        /// The headers every page-surface answer leaves with, on either pipeline: the CORS headers for an allowed
        /// origin, then the security headers (`PageGuard.secure(_:)`).
        package func decorate(_ fields: inout HTTPFields) {
            if let origin { PageGuard.decorate(&fields, origin: origin, grant: grant) }
            PageGuard.secure(&fields)
        }
    }

    /// The page surface's origin rule (see ``PageGuard``): a request with an `Origin` must come from an
    /// allowed origin; one without that a browser marks `Sec-Fetch-Site: cross-site` is refused unless it asks for
    /// a public asset (`path`, without the query). The refusal is `403 origin-not-allowed`; the caller counts it.
    package func admit(_ headers: HTTPFields, path: some StringProtocol) -> Result<Admission, APIError> {
        guard let origin = headers[.origin] else {
            if headers[PrefetchHeaders.secFetchSite]?.lowercased() == "cross-site", !PageGuard.publicAssets.contains(String(path)) {
                return .failure(Self.refusal("cross-site requests without an allowed Origin are refused"))
            }
            return .success(Admission(origin: nil, grant: .none))
        }
        let grant = grant(for: origin)
        guard grant != .none else { return .failure(Self.refusal("the origin \(quoted(origin, limit: 80)) may not call this service")) }
        return .success(Admission(origin: origin, grant: grant))
    }

    private static func refusal(_ message: String) -> APIError {
        APIError(status: .forbidden, code: .originNotAllowed, message: message, isMiss: true)
    }
}

extension TicketAccess.RequestOrigin {
    /// Where a browser says a request comes from: its `Origin`, its `Sec-Fetch-Site` and the authority it was
    /// addressed to.
    package init(_ headers: HTTPFields, authority: String?) {
        self.init(origin: headers[.origin], fetchSite: headers[PrefetchHeaders.secFetchSite], authority: authority)
    }
}

extension PrefetchRoutes {
    /// What a ticket's entitlement decided.
    package enum Entitled {
        case ticket(Ticket)
        /// The refusal as both pipelines answer it (an entitlement refusal counted in `prefetch_access_denied_total`).
        case refused(APIError)
        /// A ticket another replica may hold (the one named, or a read key's): fetch it, then decide again with it
        /// known to `lookUp`.
        case fetch(String)
    }

    /// The ticket `id` names, if a request with `headers` from `origin` is entitled to it, for both pipelines: the
    /// id well formed and the ticket found by `lookUp` (``TicketRegistry/lookUp(_:)``, or tickets the caller fetched),
    /// then ``Orchestrator/entitle(_:origin:presented:readKeyOpens:)`` with the read key opened (its ticket found the
    /// same way; only for an origin the page allows, which `entitle` would refuse first anyway, so a refused origin
    /// costs no fetch) and the presented identity.
    package static func entitledTicket(
        _ id: String, headers: HTTPFields, origin: TicketAccess.RequestOrigin, orchestrator: Orchestrator,
        lookUp: (String) -> TicketLookup
    ) -> Entitled {
        guard Ticket.isWellFormed(id) else { return .refused(APIError(PrefetchError.unknownTicket(id: id))) }
        let held: Ticket
        switch lookUp(id) {
        case .found(let ticket): held = ticket
        case .unknown: return .refused(APIError(PrefetchError.unknownTicket(id: id)))
        case .elsewhere(let id): return .fetch(id)
        }
        var readKeyOpens: Result<Ticket, PrefetchError>?
        if let key = headers[PrefetchHeaders.readKey], (try? orchestrator.authorize(origin, for: held.origins)) != nil {
            switch orchestrator.ticket(forReadKey: key, origin: origin, lookUp: lookUp) {
            case .opened(let opened): readKeyOpens = opened
            case .elsewhere(let id): return .fetch(id)
            }
        }
        do throws(PrefetchError) {
            try orchestrator.entitle(
                held, origin: origin, presented: orchestrator.credentials(in: headers).identity, readKeyOpens: readKeyOpens)
        } catch {
            orchestrator.metrics.denied(error.code.rawValue)
            return .refused(APIError(error))
        }
        return .ticket(held)
    }

    /// What a data read reads, for its bookkeeping: one request of a ticket (by ticket or by read key), or the key a
    /// same-site `page=` read names, with the config it was planned under.
    package enum DataRead: Sendable {
        case ticket(Ticket, index: Int)
        case page(StoreKey, role: ConfigRole)
    }

    /// The one answer to a data read's outcome, for every data route on either pipeline: a ready response to
    /// replay (``replayParts(_:joined:)``), or the miss as an ``APIError`` (a pending entry after `wait`, a failed
    /// prefetch, a response kept private, an absent one with why, or the read's own refusal after the reader was
    /// entitled: a malformed `wait`). Every miss is `404` with its reason, whatever it was: a prefetch that failed or
    /// is still in flight is a miss of this read, which did not go upstream, and the page falls back from it as from
    /// any other. A 5xx from a read is this service's own failure only, so a load balancer that ejects replicas on
    /// consecutive 5xx (Envoy's outlier detection, by default) never ejects them for another team's slow or failing
    /// API. With the read's bookkeeping, once:
    /// `prefetch_data_total` by outcome, `prefetch_config_data_total` by config, and the read on its ticket (the
    /// waterfall, the debug view, the waste metric).
    package static func answer(
        _ read: Result<ReadOutcome, APIError>, wait: Duration, of what: DataRead, askedAt asked: ContinuousClock.Instant,
        orchestrator: Orchestrator
    ) -> Result<(response: StoredResponse, joined: Bool), APIError> {
        let answer: Result<(response: StoredResponse, joined: Bool), APIError>
        switch read {
        case .failure(let refusal):
            answer = .failure(refusal)
        case .success(.ready(let response, let joined)):
            orchestrator.metrics.dataServed(joined: joined)
            answer = .success((response, joined))
        case .success(.pending):
            orchestrator.metrics.data("pending")
            answer = .failure(.miss(.pending, "the upstream response was still pending after \(wait.milliseconds) ms"))
        case .success(.failed(let failure, _)) where failure.code == FailureCode.private:
            orchestrator.metrics.data(failure.code.rawValue)
            answer = .failure(.miss(failure.code, failure.message))
        case .success(.failed(let failure, _)):
            orchestrator.metrics.data("failed")
            answer = .failure(.miss(failure.code, "the prefetch failed: \(failure.message)"))
        case .success(.absent(let reason)):
            orchestrator.metrics.data(reason.rawValue)
            let message: String
            switch reason {
            case .notFound: message = "nothing was prefetched for this interface and these credentials"
            case .expired: message = "the prefetched response expired before it was read"
            case .consumed: message = "the response was marked no-store and was already handed out"
            case .evicted: message = "the prefetched response was evicted"
            case .invalidated: message = "the prefetched response was invalidated (a logout, or its data changed)"
            }
            answer = .failure(.miss(reason.code, message))
        }
        let (served, reason): (ReadResult, FailureCode?) =
            switch answer {
            case .success(let ready): (ReadResult(joined: ready.joined), nil)
            case .failure(let error): (.miss, error.code)
            }
        switch what {
        case .ticket(let ticket, let index):
            ticket.recordRead(index, served: served, reason: reason, askedAt: asked, answeredAt: orchestrator.clock.now)
            orchestrator.metrics.configData(ticket.role, result: served)
        case .page(let key, let role):
            orchestrator.metrics.configData(role, result: served)
            orchestrator.recordPageRead(key, served: served, reason: reason, askedAt: asked)
        }
        return answer
    }
}
