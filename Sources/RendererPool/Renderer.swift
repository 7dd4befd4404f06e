/// One pre-initialised renderer (a webview model or a real renderer process).
///
/// Creation is the costly part and happens in ``RendererFactory/make(id:)``; everything here is what the pool
/// does with an existing renderer between its creation and its destruction.
public protocol Renderer: AnyObject, Sendable {
    /// The pool-assigned identifier, stable for the renderer's whole life.
    var id: RendererID { get }
    /// The memory the renderer reports holding, in megabytes (0 when unknown).
    var memoryMB: Int { get }
    /// Tells the renderer which page the current lease opens; it keeps that in its page state until reset.
    func open(page: String?) async
    /// Pages opened since creation or the last successful reset; a clean renderer reports none.
    func openedPages() async -> [String]
    /// Clears the previous lease's state so the next lease starts clean; throws when that is not possible,
    /// and the pool then destroys the renderer instead of reusing it.
    func reset() async throws(RendererError)
    /// Whether the renderer is alive and usable; the pool never hands out one that answers `false`.
    func isHealthy() async -> Bool
    /// Releases everything the renderer holds; for a process, terminates and reaps it. Safe to call twice.
    func destroy() async
}

/// A renderer whose health check and page hand-over never suspend (the built-in kinds keep that state behind a
/// lock), so the pool can hand out a warm one without suspending (``RendererPool/acquireWithoutSuspending(page:caller:)``).
public protocol SynchronousRenderer: Renderer {
    /// ``Renderer/isHealthy()``, answered at once.
    func isHealthyNow() -> Bool
    /// ``Renderer/open(page:)``, done at once.
    func openNow(page: String?)
}

/// Creates renderers of one kind with one profile's settings.
public protocol RendererFactory: Sendable {
    /// Creates a warm renderer with the given identifier, or throws when creation failed or timed out.
    func make(id: RendererID) async throws(RendererError) -> any Renderer
}

/// Why a renderer operation failed. `code` is a bounded value, safe as a metric label.
public struct RendererError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bounded failure classes.
    public enum Code: String, Sendable, Equatable {
        /// Creation failed (the modelled failure rate hit, or the process could not be launched).
        case createFailed
        /// The renderer did not become ready within its deadline.
        case readyTimeout
        /// The renderer died (its process exited) before or while it was used.
        case died
        /// Reset did not bring the renderer back to a clean, ready state.
        case resetFailed
    }

    /// The failure class.
    public var code: Code
    /// A human message naming the renderer or command involved.
    public var message: String

    /// Creates an error with a code and a message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }
}

/// Why an acquire failed. `code` is a bounded value, safe as a metric label.
public struct PoolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bounded failure classes.
    public enum Code: String, Sendable, Equatable {
        /// No renderer became available within the profile's `acquireTimeout`.
        case timeout
        /// Creating a renderer for this acquire failed repeatedly.
        case createFailed
        /// The pool is shutting down or has shut down.
        case shutdown
        /// The acquiring task was cancelled while waiting.
        case cancelled
        /// No profile has the requested name.
        case unknownProfile
        /// A profile failed validation (see ``RendererProfile/problems(path:)``).
        case invalidProfile
        /// The caller already holds the profile's `maxLeasesPerCaller` leases; refused without queueing.
        case callerLimit
    }

    /// The failure class.
    public var code: Code
    /// A human message naming the profile involved.
    public var message: String

    /// Creates an error with a code and a message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }
}
