import Synchronization

/// Creates ``ModelledRenderer``s: each creation costs `createMs` and fails with `failureRate`; each health
/// check finds the renderer dead with `deathRate`. Pass a seed to replay the same failures and deaths.
public struct ModelledRendererFactory: RendererFactory {
    /// Milliseconds each creation takes.
    public var createMs: Double
    /// Memory each renderer reports, in megabytes.
    public var memoryMB: Int
    /// Probability that a creation fails.
    public var failureRate: Double
    /// Probability that a health check finds the renderer dead (once dead, always dead).
    public var deathRate: Double
    private let random: SharedRandom

    /// A factory with the modelled settings of `profile`; `seed` makes failures and deaths reproducible.
    public init(profile: RendererProfile, seed: UInt64? = nil) {
        createMs = profile.createMs
        memoryMB = profile.memoryMB
        failureRate = profile.failureRate
        deathRate = profile.deathRate
        random = SharedRandom(seed: seed)
    }

    /// Waits `createMs`, then fails with probability `failureRate` or returns a fresh renderer.
    public func make(id: RendererID) async throws(RendererError) -> any Renderer {
        if createMs > 0 {
            do {
                try await Task.sleep(for: .milliseconds(createMs))
            } catch {
                throw RendererError(.createFailed, "creation of \(id) was cancelled")
            }
        }
        if random.chance(failureRate) {
            throw RendererError(.createFailed, "modelled creation of \(id) failed")
        }
        return ModelledRenderer(id: id, memoryMB: memoryMB, deathRate: deathRate, random: random)
    }
}

/// A simulated renderer: it remembers the pages opened on it until reset, and can die at a configured rate.
public final class ModelledRenderer: SynchronousRenderer {
    private struct State {
        var pages: [String] = []
        var dead = false
        var destroyed = false
    }

    /// The pool-assigned identifier.
    public let id: RendererID
    /// The configured memory figure.
    public let memoryMB: Int
    private let deathRate: Double
    private let random: SharedRandom
    private let state = Mutex(State())

    init(id: RendererID, memoryMB: Int, deathRate: Double, random: SharedRandom) {
        self.id = id
        self.memoryMB = memoryMB
        self.deathRate = deathRate
        self.random = random
    }

    /// Records the page (a nil page records nothing).
    public func open(page: String?) async {
        openNow(page: page)
    }

    public func openNow(page: String?) {
        guard let page else { return }
        state.withLock { $0.pages.append(page) }
    }

    /// Pages opened since creation or the last reset.
    public func openedPages() async -> [String] {
        state.withLock { $0.pages }
    }

    /// Forgets the opened pages; fails when the renderer is dead or destroyed.
    public func reset() async throws(RendererError) {
        let ok = state.withLock { s -> Bool in
            guard !s.dead, !s.destroyed else { return false }
            s.pages.removeAll()
            return true
        }
        if !ok { throw RendererError(.resetFailed, "renderer \(id) is dead") }
    }

    /// Alive unless destroyed, killed, or this check draws a death at `deathRate`.
    public func isHealthy() async -> Bool {
        isHealthyNow()
    }

    public func isHealthyNow() -> Bool {
        let died = random.chance(deathRate)
        return state.withLock { s in
            if died { s.dead = true }
            return !s.dead && !s.destroyed
        }
    }

    /// Makes the renderer dead, as if it crashed ("white screen").
    public func kill() {
        state.withLock { $0.dead = true }
    }

    /// Marks the renderer destroyed.
    public func destroy() async {
        state.withLock { $0.destroyed = true }
    }

    /// Whether the renderer is dead (killed, or found dead by a health check), without drawing a new death.
    public var isDead: Bool { state.withLock { $0.dead } }

    /// Whether ``destroy()`` was called.
    public var isDestroyed: Bool { state.withLock { $0.destroyed } }
}
