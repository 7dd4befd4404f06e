import PrefetchCore
package import RendererPool

/// `POST /v1/renderers/acquire`: a leased renderer. The id is the capability to release it.
package struct LeaseAnswer: Codable, Sendable {
    package var id: String
    package var profile: String
    package var warm: Bool
    package var waitedMs: Int64
    package var createMs: Int64
    package var uses: Int
}

extension LeaseAnswer {
    package init(_ lease: Lease) {
        self.init(
            id: lease.id.value, profile: lease.profile, warm: lease.warm, waitedMs: lease.waited.milliseconds,
            createMs: lease.createTime.milliseconds, uses: lease.uses)
    }
}

/// `POST /v1/renderers/{id}/release`.
package struct ReleaseAnswer: JSONAnswer, Codable {
    package var id: String
    package var released: Bool
    package var healthy: Bool
}

/// `GET /v1/renderers` (operator surface): each profile's pool.
package struct PoolsAnswer: JSONAnswer, Codable {
    package struct Percentiles: Codable, Sendable {
        package var p50: Double
        package var p90: Double
        package var p99: Double
        package var samples: Int
    }

    package struct Pool: Codable, Sendable {
        package var idle, leased, warming, pending, created, destroyed, warmHits, coldStarts, timeouts, reclaimed, createFailures,
            memoryMB: Int
        package var acquireWaitMs: Percentiles
    }

    package var profiles: [String: Pool]
}

/// `POST /v1/open`: a tap in one round trip. Each half answers its result or its own error.
package struct OpenAnswer: JSONAnswer, Codable {
    package var prefetch: TriggerAnswer?
    package var prefetchError: APIError.Body?
    package var renderer: LeaseAnswer?
    package var rendererError: APIError.Body?

    package func encode(to encoder: any Encoder) throws {
        // Both halves are always present, null when they did not happen, so a shell can test either.
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(prefetch, forKey: .prefetch)
        try container.encode(prefetchError, forKey: .prefetchError)
        try container.encode(renderer, forKey: .renderer)
        try container.encode(rendererError, forKey: .rendererError)
    }
}
