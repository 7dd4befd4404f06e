public import ServiceLifecycle

/// Keeps the provider's map current in `prefetch serve`: the saved map restored, a refresh at start, then one every
/// `settings.refreshInterval`, until graceful shutdown. Fetches go through the fetcher's loop and file writes through
/// NIO's thread pool, so no event loop or cooperative thread waits on them.
public struct ResourceRefresher: Service {
    let provider: ResourceProvider

    /// The refresher of `provider`.
    public init(provider: ResourceProvider) { self.provider = provider }

    public func run() async throws {
        guard provider.settings.manifest != nil || provider.settings.manifestPath != nil else { return }
        await cancelWhenGracefulShutdown {
            let interval = provider.settings.refreshInterval
            // The map saved by the last run is published before the first refresh, which may take a while.
            await provider.restore()
            while !Task.isCancelled {
                await provider.refresh()
                do { try await Task.sleep(for: interval) } catch { return }
            }
        }
    }
}
