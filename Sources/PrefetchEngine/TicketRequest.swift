public import PrefetchCore
public import PrefetchStore

/// One composed request of a ticket: which interface it is and under which store key its response lives.
///
/// The composed URL is not kept (it may carry the page's tokens and be kilobytes long): the key holds its digest.
public struct TicketRequest: Sendable {
    public var name: String
    public var api: String
    public var method: HTTPMethod
    public var key: StoreKey
    public var policy: StorePolicy
    public var timeout: Duration
}

/// How one request of a ticket went, for the results and the debug view.
public struct RequestTiming: Sendable {
    /// How the request got its flight.
    public var origin: FlightRole
    public var startedAt: ContinuousClock.Instant
    public var finishedAt: ContinuousClock.Instant?
    public var status: Int?
    public var bytes: Int?
    public var error: FailureCode?
    /// The response was anonymous but set a cookie or was private: it is kept under a key of this ticket's own.
    public var keptPrivate = false
    /// The interfaces whose answers this request needs (a dependent request); it starts once they are in.
    public var needs: [String] = []
}
