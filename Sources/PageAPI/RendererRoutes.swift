import Foundation
package import HTTPTypes
package import NIOCore
package import PrefetchCore
package import PrefetchEngine
import PrefetchStore
package import RendererPool

/// The renderer endpoints: leasing on the page surface (shells call them), pool statistics on the operator
/// surface.
package struct RendererRoutes: Sendable {
    package let pools: RendererPools
    package let prefetch: PrefetchRoutes

    package init(pools: RendererPools, prefetch: PrefetchRoutes) {
        self.pools = pools
        self.prefetch = prefetch
    }

    /// Who holds leases, for the per-caller share: the client address (credentials are claims a client can
    /// invent per request; its address it cannot).
    package static func leaseCaller(address: String) -> String {
        "client:" + address
    }

    package static func string(_ object: JSONObject, _ name: String) throws(APIError) -> String? {
        switch object[name] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        case .some(let other): throw APIError.badRequest(.badJSON, "\"\(name)\" must be a string, got \(other.kindName)")
        }
    }

    /// `POST /v1/renderers/{id}/release`: hands lease `id` back; the body is empty or `{"healthy": false}`.
    package func release(id: String, body: ByteBuffer) async throws(APIError) -> ReleaseAnswer {
        let object = body.readableBytes == 0 ? JSONObject() : try PrefetchRoutes.jsonObject(body)
        var healthy = true
        switch object["healthy"] {
        case nil: break
        case .bool(let flag): healthy = flag
        case .some(let other): throw APIError.badRequest(.badJSON, "\"healthy\" must be true or false, got \(other.kindName)")
        }
        if let lease = LeaseID(presented: id), await pools.release(id: lease, healthy: healthy) {
            return ReleaseAnswer(id: id, released: true, healthy: healthy)
        }
        throw APIError(
            status: .notFound, code: .unknownLease,
            message: "the lease \(quoted(id, limit: 80)) is unknown, already released or reclaimed")
    }

    /// Leases a renderer. One leased for a caller that has `left` meanwhile (its connection closed while the pool
    /// made it) is handed back at once, not left leased to nobody until the pool reclaims it.
    package func acquire(
        profile: String, page: String?, caller: String, left: Abandonment? = nil
    ) async throws(APIError) -> Answer<LeaseAnswer> {
        guard pools.pool(named: profile) != nil else { throw Self.unknownProfile(profile, in: pools) }
        do {
            let lease = try await pools.acquire(profile: profile, page: page, caller: caller)
            if left?.hasLeft == true { _ = await pools.release(lease) }
            return Answer(status: .ok, value: LeaseAnswer(lease))
        } catch {
            throw Self.leaseRefusal(error, profile: profile)
        }
    }

    /// The refusal of a lease of a profile `pools` do not have, naming those they have.
    package static func unknownProfile(_ profile: String, in pools: RendererPools) -> APIError {
        let known = pools.pools.keys.sorted().joined(separator: ", ")
        return APIError(
            status: .notFound, code: .unknownProfile,
            message: "no renderer profile named \(quoted(profile, limit: 60)) (profiles: \(known))")
    }

    /// A pool's refusal of a lease as the API answers it.
    package static func leaseRefusal(_ error: PoolError, profile: String) -> APIError {
        switch error.code {
        case .timeout:
            APIError(
                status: .serviceUnavailable, code: .timeout, message: "no \(profile) renderer became free in time: \(error.message)",
                retryAfter: 1)
        case .shutdown: APIError(status: .serviceUnavailable, code: .shutdown, message: "the service is shutting down")
        case .callerLimit:
            APIError(
                status: .tooManyRequests, code: .callerLimit,
                message: "this caller already holds its share of the \(profile) pool: \(error.message)", retryAfter: 1)
        default:
            APIError(
                status: .serviceUnavailable, code: .createFailed, message: "no \(profile) renderer could be created: \(error.message)",
                retryAfter: 1)
        }
    }

    package func snapshot() async -> PoolsAnswer {
        let snapshots = await pools.snapshot()
        var profiles: [String: PoolsAnswer.Pool] = [:]
        for (name, s) in snapshots {
            let round = { (value: Double) in (value * 10).rounded() / 10 }
            profiles[name] = PoolsAnswer.Pool(
                idle: s.idle, leased: s.leased, warming: s.warming, pending: s.pending, created: s.created, destroyed: s.destroyed,
                warmHits: s.warmHits, coldStarts: s.coldStarts, timeouts: s.timeouts, reclaimed: s.reclaimed,
                createFailures: s.createFailures,
                memoryMB: s.memoryMB,
                acquireWaitMs: .init(
                    p50: round(s.acquireWaitMs.p50), p90: round(s.acquireWaitMs.p90), p99: round(s.acquireWaitMs.p99),
                    samples: s.acquireWaitMs.samples))
        }
        return PoolsAnswer(profiles: profiles)
    }

    /// What an open asks for: the page, the user's headers, and the renderer profile (`main` for a page in the
    /// prefetch config, `plain` for others, unless the body names one).
    package static func openRequest(
        _ object: JSONObject, requestHeaders: HTTPFields, orchestrator: Orchestrator
    ) throws(APIError) -> (page: String, headers: HTTPFields, cookies: CookieJar?, profile: String) {
        let asked = try PrefetchRoutes.TriggerRequest(object, requestHeaders: requestHeaders)
        let known = (try? orchestrator.plan(page: asked.page)) != nil
        let profile = try string(object, "profile") ?? (known ? "main" : "plain")
        return (asked.page, asked.headers, asked.cookies, profile)
    }

    /// A trigger refusal that fails the whole open (the page itself is wrong), not only its prefetch half.
    package static func failsTheOpen(_ error: PrefetchError) -> Bool {
        switch error {
        case .invalidPageURL, .pageURLTooLong: true
        default: false
        }
    }
}
