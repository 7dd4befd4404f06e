import CoreMetrics
public import PrefetchCore
public import PrefetchStore

extension Orchestrator {
    /// The config `identity` is served now: the canary candidate for its share of identified callers, else the
    /// active config. `ServedConfigs` (PrefetchCore) says where a caller gets its config and decides it.
    public func selectConfig(for identity: Identity) throws(PrefetchError) -> SelectedConfig {
        guard let served = servedConfigs() else { throw .notReady(reason: "no valid prefetch config is loaded") }
        return served.config(forIdentityDigest: identity == .anonymous ? nil : identity.digest)
    }

    /// The plan for `page` under the config `identity` is served, and which config that is.
    public func plan(page: String, identity: Identity) throws(PrefetchError) -> (Plan, ConfigRole) {
        let selected = try selectConfig(for: identity)
        return (try plan(page: page, in: selected.config), selected.role)
    }

    /// The plan for `page` under `config`.
    func plan(page: String, in config: PrefetchConfig) throws(PrefetchError) -> Plan {
        let length = page.utf8.count
        guard length <= settings.maximumPageURLBytes else { throw .pageURLTooLong(length: length, limit: settings.maximumPageURLBytes) }
        do {
            return try Plan.make(page: page, config: config)
        } catch {
            switch error {
            case .invalidPageURL: throw .invalidPageURL(message: error.description)
            case .noMatch: throw .noConfig(message: error.description)
            }
        }
    }
}

extension EngineMetrics {
    /// Counts an accepted trigger and its requests under the config it was planned with:
    /// `prefetch_config_triggers_total{config}` and `prefetch_config_requests_total{config}`.
    func configTrigger(_ role: ConfigRole, requests: Int) {
        counter("prefetch_config_triggers_total", ("config", role.rawValue)).increment()
        counter("prefetch_config_requests_total", ("config", role.rawValue)).increment(by: Int64(requests))
    }

    /// Counts a read of a response of a ticket planned with `role`'s config (a data read, or a result a results view
    /// handed out): `prefetch_config_data_total{config, result}`, `result` being `hit`, `joined` or `miss` (every
    /// answer that is not the response: pending, failed, a miss reason).
    public func configData(_ role: ConfigRole, result: ReadResult) {
        configDataSeries[Self.configDataIndex(role, result)].increment()
    }

    /// Counts the requests of a ticket leaving the registry that were never served to a reader:
    /// `prefetch_config_unread_total{config}`, the wasted prefetches per version.
    public func ticketLeft(_ ticket: Ticket) {
        let unread = ticket.unreadCount
        guard unread > 0 else { return }
        counter("prefetch_config_unread_total", ("config", ticket.role.rawValue)).increment(by: Int64(unread))
    }

    /// Creates the per-version series at zero, so dashboards see both versions before the first event.
    func registerConfigSeries() {
        for role in ConfigRole.allCases {
            _ = counter("prefetch_config_triggers_total", ("config", role.rawValue))
            _ = counter("prefetch_config_requests_total", ("config", role.rawValue))
            _ = counter("prefetch_config_unread_total", ("config", role.rawValue))
            for result in ReadResult.allCases {
                _ = counter("prefetch_config_data_total", ("config", role.rawValue), ("result", result.rawValue))
            }
        }
    }
}
