import CoreMetrics
import PrefetchFetcher

extension Orchestrator {
    /// Records the byte budgets the service runs under (`--ticket-bytes`, `--in-flight-bytes`,
    /// `--request-body-bytes`) and the bytes of upstream responses and of request bodies still arriving, so the
    /// budget-use ratios divide by the limits actually configured. Called once at startup and on every scrape of
    /// `/metrics` (beside ``recordGauges()``). The store records its own budget (`prefetch_store_budget_bytes`).
    public func recordBudgetGauges() {
        metrics.ticketBudgetBytes.record(settings.ticketBytes)
        metrics.inFlightBudgetBytes.record(settings.inFlightBytes)
        metrics.requestBodyBudgetBytes.record(settings.requestBodyBytes)
        metrics.requestBodyBytes.record(requestBodies.bytes)
        metrics.inFlightBytes.record(fetcher.bufferedBytes)
    }
}
