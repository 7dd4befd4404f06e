import Synchronization

/// The bytes of request bodies the page listener's connections hold while the bodies arrive, over all of them, within
/// a limit (``EngineSettings/requestBodyBytes``): each body is bounded on its own
/// (``EngineSettings/maximumRequestBody``), and this bounds their sum, so thousands of connections each sending most
/// of a body cannot take the service's memory. A connection reserves each part before it keeps it and gives back what
/// it holds once the request is answered or dropped. `prefetch_request_body_bytes` reads it at every scrape
/// (``Orchestrator/recordBudgetGauges()``).
///
/// The first ``allowance`` bytes of each body are the connection's own and come from no budget: the usual trigger
/// (a page URL, a few headers, a small jar) is never refused because others filled the budget, and what all
/// connections hold that way is bounded by their count (`--max-connections`). Only a body past it competes.
public final class BodyBudget: Sendable {
    public let limit: Int
    /// Bytes of each body a connection holds without asking the budget. 16 KiB.
    public let allowance: Int
    private let held = Atomic<Int>(0)

    public init(limit: Int, allowance: Int = 16 * 1024) {
        self.limit = limit
        self.allowance = allowance
    }

    /// The bytes a body of `total` bytes takes from the budget: those past the connection's ``allowance``.
    public func charge(_ total: Int) -> Int { max(0, total - allowance) }

    /// The bytes held now, by every connection.
    public var bytes: Int { held.load(ordering: .relaxed) }

    /// Takes `count` more bytes, or nothing when they would pass the limit.
    public func reserve(_ count: Int) -> Bool {
        var now = held.load(ordering: .relaxed)
        while true {
            guard now + count <= limit else { return false }
            let (exchanged, original) = held.compareExchange(
                expected: now, desired: now + count, successOrdering: .relaxed, failureOrdering: .relaxed)
            if exchanged { return true }
            now = original
        }
    }

    /// Gives back `count` bytes taken with ``reserve(_:)``.
    public func release(_ count: Int) {
        guard count > 0 else { return }
        held.subtract(count, ordering: .relaxed)
    }
}
