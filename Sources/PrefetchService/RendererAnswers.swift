import PrefetchCore
import RendererPool

/// `POST /v1/renderers/acquire`: a leased renderer. The id is the capability to release it.
struct LeaseAnswer: Codable, Sendable {
    var id: String
    var profile: String
    var warm: Bool
    var waitedMs: Int64
    var createMs: Int64
    var uses: Int
}

extension LeaseAnswer {
    init(_ lease: Lease) {
        self.init(
            id: lease.id.value, profile: lease.profile, warm: lease.warm, waitedMs: lease.waited.milliseconds,
            createMs: lease.createTime.milliseconds, uses: lease.uses)
    }
}

/// `POST /v1/renderers/{id}/release`.
struct ReleaseAnswer: JSONAnswer, Codable {
    var id: String
    var released: Bool
    var healthy: Bool
}

/// `GET /v1/renderers` (operator surface): each profile's pool.
struct PoolsAnswer: JSONAnswer, Codable {
    struct Percentiles: Codable, Sendable {
        var p50: Double
        var p90: Double
        var p99: Double
        var samples: Int
    }

    struct Pool: Codable, Sendable {
        var idle, leased, warming, pending, created, destroyed, warmHits, coldStarts, timeouts, reclaimed, createFailures, memoryMB: Int
        var acquireWaitMs: Percentiles
    }

    var profiles: [String: Pool]
}

/// `POST /v1/open`: a tap in one round trip. Each half answers its result or its own error.
struct OpenAnswer: JSONAnswer, Codable {
    var prefetch: TriggerAnswer?
    var prefetchError: APIError.Body?
    var renderer: LeaseAnswer?
    var rendererError: APIError.Body?

    func encode(to encoder: any Encoder) throws {
        // Both halves are always present, null when they did not happen, so a shell can test either.
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(prefetch, forKey: .prefetch)
        try container.encode(prefetchError, forKey: .prefetchError)
        try container.encode(renderer, forKey: .renderer)
        try container.encode(rendererError, forKey: .rendererError)
    }
}
