/// How a store is doing (``ResponseStore/health``).
public enum StoreHealth: String, Sendable, Hashable {
    /// An in-process store: nothing to be away.
    case inProcess = "in-process"
    /// A shared store that answers.
    case ok
    /// A shared store that cannot be reached: this replica answers from its fallback.
    case degraded
}
