/// The two HTTP listeners: where they listen, who may use the operator surface, connection bounds and timeouts, with
/// production defaults.
public struct ListenerSettings: Sendable {
    /// Address of the page surface (what shells and pages call). Default `127.0.0.1`; a container sets `0.0.0.0`.
    public var host: String = "127.0.0.1"
    /// Port of the page surface; `0` picks a free one. Default 8080.
    public var port: Int = 8080
    /// Address of the operator surface (`/ui`, debug, plan, config, renderer stats, `/metrics`). Default
    /// `127.0.0.1`: operators reach it from the host, never from where pages are.
    public var adminHost: String = "127.0.0.1"
    /// Port of the operator surface; `0` picks a free one. Default 8081.
    public var adminPort: Int = 8081
    /// When set, every operator request must carry `Authorization: Bearer <token>` (compared in constant time).
    public var adminToken: String?
    /// How long a connection may stay idle, and the longest a request head may take to arrive. Default 30 s.
    public var idleTimeout: Duration = .seconds(30)
    /// The longest a request body may take to arrive once its head is in, on every route of both listeners; a
    /// later body ends its connection (`408 body-timeout` unless the route answered already). Default 10 s.
    public var bodyTimeout: Duration = .seconds(10)
    /// Client connections the page listener holds open at once; more are closed as they arrive. Keep it under
    /// the process's open-file limit, less what upstream and Redis connections need. Default 4096.
    public var maxConnections: Int = 4096
    /// Client connections the operator listener holds open at once; more are closed as they arrive. Default 64.
    public var adminMaxConnections: Int = 64
    /// Serve the demo pages (`/demo`, `/demo/shell.html`, `/demo/page.html`, `/demo/interfaces`) on the page
    /// listener, and link them from `/`. Default off: a demo page is a tool that reads a user's data and shows it;
    /// it belongs on a developer's machine (`scripts/run.sh` turns it on), never beside a production page surface.
    public var demo = false

    /// The defaults.
    public init() {}
}
