import PrefetchStore

/// A flight this replica leads: where it is held and what `complete` needs to know.
struct Flight: Sendable, Hashable {
    enum Mode: Sendable, Hashable {
        /// Led in Redis under this lock value.
        case redis(lockValue: [UInt8])
        /// Led in the fallback store (Redis was down at `begin`) under its token.
        case fallback(FlightToken)
    }

    var key: StoreKey
    /// The key's digest (see `KeySpace`), so completing needs no second hash.
    var digest: String
    var policy: StorePolicy
    var mode: Mode
    var startedAt: ContinuousClock.Instant
}

/// The flights this replica leads, by token. A leader that never completes is forgotten after `staleAfter` (the
/// store uses three lock ages: its lock has expired long before, so its completion would be ignored anyway); the
/// book is pruned on insert, at most once a second.
struct FlightBook: Sendable {
    private(set) var flights: [FlightToken: Flight] = [:]
    private var lastPrune: ContinuousClock.Instant?

    mutating func insert(_ token: FlightToken, _ flight: Flight, staleAfter: Duration) {
        let now = flight.startedAt
        if lastPrune.map({ now - $0 >= .seconds(1) }) ?? true {
            lastPrune = now
            flights = flights.filter { now - $0.value.startedAt < staleAfter }
        }
        flights[token] = flight
    }

    /// Removes and returns the flight `token` leads for `key`; nil for an unknown token or another key.
    mutating func take(_ token: FlightToken, key: StoreKey) -> Flight? {
        guard let flight = flights[token], flight.key == key else { return nil }
        flights[token] = nil
        return flight
    }
}
