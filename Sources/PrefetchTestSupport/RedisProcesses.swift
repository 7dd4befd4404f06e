// Real Redis processes for tests: one `redis-server`, a Redis Cluster of several, and a Sentinel-managed primary.
// Each listens on 127.0.0.1 and free ports, keeps no data, writes its files to a temporary directory, and is always
// stopped by the test that started it. Shared by the store's tests (RedisStoreTests) and the service's
// (ServiceSocketTests, DeploymentTests).

import Foundation
public import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A Redis a test started for the service to share: its store URL, and how to stop it.
public protocol SharedRedisProcess: Sendable {
    /// The `--store` URL that reaches it.
    var url: String { get }
    /// Kills it and waits until it has exited.
    func stop() async
}

/// Why a test's Redis processes could not be set up.
public struct TestSetupError: Error, CustomStringConvertible {
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// A port nothing listens on right now, or the error saying the system refused.
func freeTestPort() throws -> Int {
    guard let port = unusedLocalPort() else { throw TestSetupError("cannot bind a socket to 127.0.0.1") }
    return port
}

/// A real `redis-server` on 127.0.0.1 and a free port, with no persistence. Always stop it (see `withRedis`).
public final class RedisServer: SharedRedisProcess {
    public let port: Int
    /// Extra configuration directives (`--requirepass`, `--user`, ...).
    private let arguments: [String]
    /// What `redis-cli` needs to authenticate (`--user`, `--pass`).
    private let cliAuth: [String]
    private let process = Mutex<TestProcess?>(nil)

    public var url: String { "redis://127.0.0.1:\(port)" }

    package init(port: Int, arguments: [String] = [], cliAuth: [String] = []) {
        self.port = port
        self.arguments = arguments
        self.cliAuth = cliAuth
    }

    /// Starts a server with extra `arguments`; `cliAuth` lets the readiness check (and `cli`) authenticate.
    /// A port found free can be taken by another process before redis-server binds it (a service on an ephemeral
    /// port, another test run): then the server exits at once and never answers, so it is started again on another
    /// port, up to three times.
    public static func start(arguments: [String] = [], cliAuth: [String] = []) async throws -> RedisServer {
        var attempt = 1
        while true {
            let server = RedisServer(port: try freeTestPort(), arguments: arguments, cliAuth: cliAuth)
            do {
                try await server.launch()
                return server
            } catch  where attempt < 3 {
                attempt += 1
            }
        }
    }

    /// Starts (again) on the same port and waits until it answers PING.
    public func launch() async throws {
        let launched = TestProcess()
        launched.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
        launched.arguments =
            [
                "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
                // A replica writes the primary's snapshot to its directory: a temporary one, never the repository.
                "--dir", FileManager.default.temporaryDirectory.path,
            ] + arguments
        launched.standardOutput = FileHandle.nullDevice
        launched.standardError = FileHandle.nullDevice
        try launchSerially(launched)
        process.withLock { $0 = launched }
        guard await eventually(within: 5, { await ping() }) else {
            await stop()
            throw TestSetupError("redis-server on port \(port) never answered PING")
        }
        // The port may have been taken between its check and this server's bind (by a server another test started):
        // then this one exited and the other answered the PING. Only this server's own process id will do.
        if let answering = await processID(), answering != launched.processIdentifier {
            await stop()
            throw TestSetupError("port \(port) is another redis-server's (pid \(answering)), not the one started on it")
        }
    }

    /// The `process_id` of the server answering on ``port`` (`INFO server`, authenticated like the readiness check),
    /// or nil when it does not say (a user without `INFO`).
    private func processID() async -> Int32? {
        guard let info = await cli(["INFO", "server"]) else { return nil }
        let line = info.split(whereSeparator: \.isNewline).first { $0.hasPrefix("process_id:") }
        return line.flatMap { Int32($0.dropFirst("process_id:".count).trimmingCharacters(in: .whitespaces)) }
    }

    /// Kills the server (SIGKILL: it keeps no data, and a child may inherit a blocked SIGTERM) and waits until it
    /// has exited.
    public func stop() async {
        await killHeld(process)
    }

    /// Whether the server answers a `PING` on a socket of its own: `+PONG`, or `-NOAUTH` from a server that wants a
    /// password (it is up; the stores authenticate). A socket, not `redis-cli`: a child process per try would spawn
    /// dozens of processes per start.
    private func ping() async -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 0, tv_usec: 500_000)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return false }
        let request = Array("PING\r\n".utf8)
        guard send(descriptor, request, request.count, 0) == request.count else { return false }
        var reply = [UInt8](repeating: 0, count: 64)
        let count = recv(descriptor, &reply, reply.count, 0)
        guard count > 0 else { return false }
        let text = String(decoding: reply[0..<count], as: UTF8.self)
        return text.hasPrefix("+PONG") || text.hasPrefix("-NOAUTH")
    }

    /// Runs one `redis-cli` command against the server (authenticated like the readiness check); its output, or
    /// nil when it did not finish within 2 s.
    public func cli(_ command: [String]) async -> String? {
        await redisCLI(port: port, auth: cliAuth, command)
    }
}

/// Kills the process `held` holds, if any (SIGKILL), forgets it, and waits until it has exited.
public func killHeld(_ held: borrowing Mutex<TestProcess?>) async {
    guard
        let running = held.withLock({ current -> TestProcess? in
            defer { current = nil }
            return current
        })
    else { return }
    running.signal(SIGKILL)
    _ = await eventually { !running.isRunning }
}

/// Runs one `redis-cli` command against 127.0.0.1:`port` (with `auth`: `--user`, `--pass`); its output, or nil when
/// it did not finish within 2 s.
public func redisCLI(port: Int, auth: [String] = [], _ command: [String]) async -> String? {
    let cli = TestProcess()
    cli.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
    cli.arguments = ["-h", "127.0.0.1", "-p", "\(port)"] + auth + (auth.isEmpty ? [] : ["--no-auth-warning"]) + command
    let pipe = Pipe()
    cli.standardOutput = pipe
    cli.standardError = FileHandle.nullDevice
    guard (try? launchSerially(cli)) != nil else { return nil }
    _ = await eventually(within: 2) { !cli.isRunning }
    if cli.isRunning {
        cli.terminate()
        return nil
    }
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    return String(decoding: output, as: UTF8.self)
}

/// A real Redis Cluster of `primaries` primaries on 127.0.0.1 and free ports, no persistence, temp dirs.
///
/// Each node is a `RedisServer` (so it is started, checked with PING and killed as every other test server is) given
/// the cluster directives: cluster mode, a cluster bus port of its own (`--cluster-port`, a free port: the default
/// bus port, the client port + 10000, does not exist for a client port above 55535, and free ports go up to 60999),
/// and its `nodes.conf` and working directory in a directory of its own under one temporary directory per cluster,
/// never the repository. Always stop it (see `withCluster`).
///
/// The slot migration steps are those `redis-cli --cluster reshard` takes, one at a time, so a test can look at the
/// store between them: after `beginMigration` the source answers `-ASK` for keys of the slot it no longer holds,
/// after `finishMigration` it answers `-MOVED`.
public final class RedisCluster: SharedRedisProcess {
    /// The primaries' ports, in start order.
    public let ports: [Int]
    /// The replicas' ports (`replicaPorts[i]` replicates `ports[i]`); empty without replicas.
    public let replicaPorts: [Int]
    /// The nodes, primaries then replicas, in start order.
    private let nodes: [RedisServer]
    /// The cluster's temporary directory: one `node-<i>` directory per node, with its `nodes.conf`.
    private let directory: URL

    /// `redis-cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3` (all seeds).
    public var url: String { "redis-cluster://" + ports.map { "127.0.0.1:\($0)" }.joined(separator: ",") }

    /// A cluster of already running `nodes` (the first `primaries` of them primaries) whose files are under
    /// `directory`.
    private init(nodes: [RedisServer], primaries: Int, directory: URL) {
        self.nodes = nodes
        self.ports = nodes.prefix(primaries).map(\.port)
        self.replicaPorts = nodes.dropFirst(primaries).map(\.port)
        self.directory = directory
    }

    /// Starts `primaries` (default 3) cluster-enabled redis-servers (`--cluster-enabled yes`, a `--cluster-config-file`
    /// and `--dir` in a fresh temporary directory per node, `--cluster-node-timeout 2000`, `--save ""`,
    /// `--appendonly no`, `--bind 127.0.0.1`, `--daemonize no`, and a free `--cluster-port`), runs
    /// `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes` (slots split evenly, no replicas), and waits
    /// until every node's `CLUSTER INFO` says `cluster_state:ok` and every node agrees on the slot owners. Throws
    /// (after stopping what it started) if that does not happen within ~20 s. `redis-cli --cluster create` wants at
    /// least 3 primaries: fewer is an error. With `replicas`, each primary then gets a replica (`redis-cli --cluster
    /// add-node --cluster-slave`), and the start waits until every replica's link to its primary is up.
    public static func start(primaries: Int = 3, replicas: Bool = false) async throws -> RedisCluster {
        guard primaries >= 3 else {
            throw TestSetupError("a Redis Cluster needs at least 3 primaries, not \(primaries)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "prefetch-cluster-\(UUID().uuidString)")
        var nodes: [RedisServer] = []
        do {
            for index in 0..<(replicas ? 2 * primaries : primaries) {
                nodes.append(try await startNode(in: directory.appendingPathComponent("node-\(index)")))
            }
        } catch {
            for node in nodes { await node.stop() }
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        let cluster = RedisCluster(nodes: nodes, primaries: primaries, directory: directory)
        do {
            try await cluster.form()
            try await cluster.addReplicas()
        } catch {
            await cluster.stop()
            throw error
        }
        return cluster
    }

    /// Starts one cluster-enabled node whose files go to `directory` and waits until it answers PING. Up to three
    /// tries, each on fresh ports: the bus port is chosen before the server's own, so the two may (rarely) collide.
    private static func startNode(in directory: URL) async throws -> RedisServer {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let config = directory.appendingPathComponent("nodes.conf")
        var failure: (any Error)?
        for _ in 0..<3 {
            do {
                // After RedisServer's own arguments: this `--dir` overrides its shared temporary directory.
                return try await RedisServer.start(arguments: [
                    "--cluster-enabled", "yes", "--cluster-port", "\(try freeTestPort())",
                    "--cluster-config-file", config.path, "--dir", directory.path, "--cluster-node-timeout", "2000",
                ])
            } catch {
                failure = error
                // A node that came up and died may have written its identity: the next try starts afresh.
                try? FileManager.default.removeItem(at: config)
            }
        }
        throw failure ?? TestSetupError("no cluster node started in \(directory.path)")
    }

    /// Joins the started nodes into one cluster with `redis-cli --cluster create` and waits (20 s in all) until it is
    /// formed (see `isFormed`); throws with what redis-cli said if it is not.
    private func form() async throws {
        let deadline = ContinuousClock.now.advanced(by: .seconds(20))
        let create =
            ["--cluster", "create"] + ports.map { "127.0.0.1:\($0)" } + ["--cluster-replicas", "0", "--cluster-yes"]
        // redis-cli waits (a second a round) until the nodes agree on the configuration: a few seconds, not 2.
        let said = await runRedisCLI(create, within: 20)
        let left = max((deadline - ContinuousClock.now) / .seconds(1), 2)
        guard await eventually(within: left, { await isFormed() }) else {
            let output = said.map { Self.withoutColours($0).suffix(800) } ?? "nothing: it did not finish"
            let why = "the cluster on ports \(ports) did not form within 20 s"
            throw TestSetupError("\(why); redis-cli --cluster create said: \(output)")
        }
    }

    /// Makes each of `replicaPorts` a replica of its primary and waits (20 s in all) until each has its link up.
    private func addReplicas() async throws {
        for (primary, replica) in zip(ports, replicaPorts) {
            let primaryID = try await requireNodeID(port: primary)
            let add = [
                "--cluster", "add-node", "127.0.0.1:\(replica)", "127.0.0.1:\(primary)", "--cluster-slave",
                "--cluster-master-id", primaryID,
            ]
            let said = await runRedisCLI(add, within: 20)
            let linked = await eventually(within: 20) {
                await cli(port: replica, ["INFO", "replication"])?.contains("master_link_status:up") == true
            }
            guard linked else {
                let output = said.map { Self.withoutColours($0).suffix(800) } ?? "nothing: it did not finish"
                throw TestSetupError("the replica on \(replica) never linked to \(primary); redis-cli said: \(output)")
            }
        }
    }

    /// Kills the node on `port` (SIGKILL), as a machine's loss would; the others go on.
    public func kill(port: Int) async {
        await nodes.first { $0.port == port }?.stop()
    }

    /// Whether every node says `cluster_state:ok` and every node sees the same slot owners.
    private func isFormed() async -> Bool {
        var agreed: [ClusterSlotRange]?
        for port in ports {
            guard await cli(port: port, ["CLUSTER", "INFO"])?.contains("cluster_state:ok") == true,
                let view = await slotRanges(seenBy: port), !view.isEmpty
            else { return false }
            if let agreed, agreed != view { return false }
            agreed = view
        }
        return true
    }

    /// Kills every node (SIGKILL) and waits for them to exit; removes the temp dirs. Stopping twice is harmless.
    public func stop() async {
        await withTaskGroup(of: Void.self) { group in
            for node in nodes { group.addTask { await node.stop() } }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs one redis-cli command against the node on `port` (no -c); its output or nil (when it did not finish
    /// within 5 s). An error reply is output too: `MOVED 3300 127.0.0.1:7001`, `ASK 3300 127.0.0.1:7001`.
    public func cli(port: Int, _ command: [String]) async -> String? {
        await runRedisCLI(["-h", "127.0.0.1", "-p", "\(port)"] + command, within: 5)
    }

    /// The port of the primary that serves `slot` now, as node `ports[0]` sees it (`CLUSTER SLOTS`).
    public func owner(ofSlot slot: Int) async -> Int? {
        await owner(ofSlot: slot, seenBy: ports[0])
    }

    /// The port of the primary that serves `slot` as the node on `port` sees it; nil if it names none or does not
    /// answer.
    public func owner(ofSlot slot: Int, seenBy port: Int) async -> Int? {
        await slotRanges(seenBy: port)?.first { $0.first <= slot && slot <= $0.last }?.port
    }

    /// The slot ranges and their primaries as the node on `port` sees them (`CLUSTER SLOTS`, as JSON), by first slot;
    /// nil if it does not answer with them.
    private func slotRanges(seenBy port: Int) async -> [ClusterSlotRange]? {
        guard let output = await cli(port: port, ["--json", "CLUSTER", "SLOTS"]),
            let ranges = try? JSONDecoder().decode([ClusterSlotRange].self, from: Data(output.utf8))
        else { return nil }
        return ranges.sorted { $0.first < $1.first }
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    public func slot(of key: String) async -> Int? {
        await cli(port: ports[0], ["CLUSTER", "KEYSLOT", key]).flatMap { Int(Self.trimmed($0)) }
    }

    /// Step 1 of a reshard: `CLUSTER SETSLOT slot IMPORTING <source id>` on the target, then
    /// `CLUSTER SETSLOT slot MIGRATING <target id>` on the source. After it, the source answers `-ASK` for keys of the
    /// slot it no longer holds (it still serves those it holds). Throws with the reply of a node that refuses.
    public func beginMigration(slot: Int, from source: Int, to target: Int) async throws {
        let sourceID = try await requireNodeID(port: source)
        let targetID = try await requireNodeID(port: target)
        try await requireOK(port: target, ["CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID])
        try await requireOK(port: source, ["CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID])
    }

    /// Step 2: moves every key of `slot` from source to target (`CLUSTER GETKEYSINSLOT` then
    /// `MIGRATE 127.0.0.1 <target> "" 0 5000 KEYS ...`, 100 keys a round until the source lists none), returning how
    /// many moved (a key that expired while it moved may be counted). Throws with the reply of a failed round.
    @discardableResult public func moveKeys(slot: Int, from source: Int, to target: Int) async throws -> Int {
        var moved = 0
        // A bound, not a wait: 100 000 keys are far more than a test writes; a slot that never empties is an error.
        for _ in 0..<1000 {
            let keys = try await keys(inSlot: slot, on: source)
            if keys.isEmpty { return moved }
            let migrate = ["MIGRATE", "127.0.0.1", "\(target)", "", "0", "5000", "KEYS"] + keys
            // MIGRATE may take its own 5 s: redis-cli is given longer.
            let reply = await runRedisCLI(["-h", "127.0.0.1", "-p", "\(source)"] + migrate, within: 10)
                .map(Self.trimmed)
            switch reply {
            case "OK"?: moved += keys.count
            case "NOKEY"?: continue  // every listed key expired before it could move
            default:
                throw TestSetupError("MIGRATE of slot \(slot) from \(source) to \(target) answered \(reply ?? "nothing")")
            }
        }
        throw TestSetupError("slot \(slot) on \(source) never emptied")
    }

    /// Up to 100 keys of `slot` the node on `port` holds (`CLUSTER GETKEYSINSLOT`, as JSON).
    private func keys(inSlot slot: Int, on port: Int) async throws -> [String] {
        let output = await cli(port: port, ["--json", "CLUSTER", "GETKEYSINSLOT", "\(slot)", "100"])
        guard let output, let keys = try? JSONDecoder().decode([String].self, from: Data(output.utf8)) else {
            throw TestSetupError("CLUSTER GETKEYSINSLOT \(slot) on \(port) answered \(output ?? "nothing")")
        }
        return keys
    }

    /// Step 3: `CLUSTER SETSLOT slot NODE <target id>` on target, source and every other node; waits (10 s at most)
    /// until every node names the target as the owner. After it the source answers `-MOVED`. The source refuses while
    /// it still holds keys of the slot (see `moveKeys`); throws with the reply of a node that refuses, or if the nodes
    /// do not agree in time.
    public func finishMigration(slot: Int, from source: Int, to target: Int) async throws {
        let targetID = try await requireNodeID(port: target)
        for port in [target, source] + ports.filter({ $0 != target && $0 != source }) {
            try await requireOK(port: port, ["CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID])
        }
        let settled = await eventually(within: 10) {
            for port in ports {
                guard await owner(ofSlot: slot, seenBy: port) == target else { return false }
            }
            return true
        }
        guard settled else {
            throw TestSetupError("not every node names \(target) as the owner of slot \(slot)")
        }
    }

    /// The three steps in order: `beginMigration`, `moveKeys`, `finishMigration`.
    public func reshard(slot: Int, from source: Int, to target: Int) async throws {
        try await beginMigration(slot: slot, from: source, to: target)
        try await moveKeys(slot: slot, from: source, to: target)
        try await finishMigration(slot: slot, from: source, to: target)
    }

    /// The node id of the node on `port` (`CLUSTER MYID`); nil if it does not answer with one.
    public func nodeID(port: Int) async -> String? {
        guard let output = await cli(port: port, ["CLUSTER", "MYID"]) else { return nil }
        let id = Self.trimmed(output)
        return id.count == 40 && id.allSatisfy(\.isHexDigit) ? id : nil
    }

    /// `nodeID(port:)`, or an error naming the port.
    private func requireNodeID(port: Int) async throws -> String {
        guard let id = await nodeID(port: port) else {
            throw TestSetupError("the node on \(port) did not say its id")
        }
        return id
    }

    /// Runs `command` on the node on `port`; throws with its reply unless that is `OK`.
    private func requireOK(port: Int, _ command: [String]) async throws {
        let reply = await cli(port: port, command).map(Self.trimmed)
        guard reply == "OK" else {
            throw TestSetupError("\(command.joined(separator: " ")) on \(port) answered \(reply ?? "nothing")")
        }
    }

    /// `text` without surrounding whitespace and newlines (redis-cli ends a reply with a newline, an error with two).
    private static func trimmed(_ text: String) -> String {
        text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `text` without the ANSI colour sequences (`ESC [ ... m`) `redis-cli --cluster` writes even to a pipe.
    private static func withoutColours(_ text: String) -> String {
        let pieces = text.components(separatedBy: "\u{1B}[")
        return pieces.dropFirst().reduce(pieces[0]) { kept, piece in
            kept + (piece.firstIndex(of: "m").map { String(piece[piece.index(after: $0)...]) } ?? piece)
        }
    }
}

/// One entry of `CLUSTER SLOTS` as `redis-cli --json` writes it, `[first, last, [ip, port, id, {...}], ...]`: the
/// range and its primary's port (the replicas that may follow are not read).
private struct ClusterSlotRange: Decodable, Equatable {
    var first: Int
    var last: Int
    var port: Int

    /// Reads the range's bounds and its primary's port from the entry's array.
    init(from decoder: any Decoder) throws {
        var entry = try decoder.unkeyedContainer()
        first = try entry.decode(Int.self)
        last = try entry.decode(Int.self)
        var primary = try entry.nestedUnkeyedContainer()
        _ = try primary.decode(String.self)
        port = try primary.decode(Int.self)
    }
}

/// Runs `/usr/bin/redis-cli` with `arguments`; its standard output (where it also writes error replies), or nil when
/// it could not start or did not finish within `seconds` (then it is killed and reaped). `redisCLI` with a limit of
/// its own and no fixed `-h`/`-p`, for `--cluster create` and `MIGRATE`, which may take longer than 2 s. For small
/// outputs: one beyond a pipe's buffer would stall redis-cli until the limit.
private func runRedisCLI(_ arguments: [String], within seconds: Double) async -> String? {
    let cli = TestProcess()
    cli.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
    cli.arguments = arguments
    let pipe = Pipe()
    cli.standardOutput = pipe
    cli.standardError = FileHandle.nullDevice
    guard (try? launchSerially(cli)) != nil else { return nil }
    _ = await eventually(within: seconds) { !cli.isRunning }
    if cli.isRunning {
        cli.signal(SIGKILL)
        _ = await eventually { !cli.isRunning }
        return nil
    }
    return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
}

/// Runs `body` with a fresh cluster and always stops it afterwards, whatever happens.
public func withCluster(primaries: Int = 3, replicas: Bool = false, _ body: (RedisCluster) async throws -> Void) async throws {
    let cluster = try await RedisCluster.start(primaries: primaries, replicas: replicas)
    do {
        try await body(cluster)
    } catch {
        await cluster.stop()
        throw error
    }
    await cluster.stop()
}

/// One `redis-server --sentinel` on 127.0.0.1 and a free port, monitoring a primary as `name` (quorum 2), with its
/// file (which a sentinel rewrites as it learns the deployment) in a temporary directory of its own.
public final class RedisSentinelProcess: Sendable {
    public let port: Int
    public let name: String
    private let directory: URL
    private let process = Mutex<TestProcess?>(nil)

    /// Writes the sentinel's file: `primary`'s port, `down-after-milliseconds` `downAfter`, failover timeout 3 s.
    public init(monitoring primary: Int, name: String, downAfterMilliseconds downAfter: Int = 500) throws {
        port = try freeTestPort()
        self.name = name
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-sentinel-\(port)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let config = """
            port \(port)
            bind 127.0.0.1
            dir \(directory.path)
            sentinel monitor \(name) 127.0.0.1 \(primary) 2
            sentinel down-after-milliseconds \(name) \(downAfter)
            sentinel failover-timeout \(name) 3000
            sentinel parallel-syncs \(name) 1

            """
        try config.write(to: directory.appendingPathComponent("sentinel.conf"), atomically: true, encoding: .utf8)
    }

    public func start() throws {
        let launched = TestProcess()
        launched.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
        launched.arguments = [directory.appendingPathComponent("sentinel.conf").path, "--sentinel"]
        launched.standardOutput = FileHandle.nullDevice
        launched.standardError = FileHandle.nullDevice
        try launchSerially(launched)
        process.withLock { $0 = launched }
    }

    /// Kills the sentinel (SIGKILL), waits for it to exit, and removes its directory.
    public func stop() async {
        await killHeld(process)
        try? FileManager.default.removeItem(at: directory)
    }

    /// One `redis-cli` command to this sentinel: its output, or nil.
    public func cli(_ command: [String]) async -> String? {
        await redisCLI(port: port, command)
    }

    /// The primary's port as this sentinel names it.
    public func primaryPort() async -> Int? {
        let lines = await cli(["SENTINEL", "get-master-addr-by-name", name])?.split(separator: "\n")
        return lines.flatMap { $0.count == 2 ? Int($0[1]) : nil }
    }

    /// A field of `SENTINEL master <name>`.
    public func field(_ field: String) async -> String? {
        guard let lines = await cli(["SENTINEL", "master", name])?.split(separator: "\n").map(String.init),
            let index = lines.firstIndex(of: field), index + 1 < lines.count
        else { return nil }
        return lines[index + 1]
    }
}

/// A Sentinel-managed Redis: a primary, a replica of it, and three sentinels (quorum 2) that know both and each
/// other when `start` returns. `url` is the `redis-sentinel://` store URL naming the three. Always stop it.
public final class RedisSentinels: SharedRedisProcess {
    public let name: String
    public let primary: RedisServer
    public let replica: RedisServer
    public let sentinels: [RedisSentinelProcess]

    public var url: String { "redis-sentinel://" + sentinels.map { "127.0.0.1:\($0.port)" }.joined(separator: ",") + "/\(name)" }

    private init(name: String, primary: RedisServer, replica: RedisServer, sentinels: [RedisSentinelProcess]) {
        self.name = name
        self.primary = primary
        self.replica = replica
        self.sentinels = sentinels
    }

    /// Starts the primary and its replica, waits until the replica is in sync (so the sentinels' first look finds
    /// it), then three sentinels, and waits until each knows the replica and the two others (a failover needs a
    /// quorum and an elected leader). Throws, after stopping what it started, if that does not happen.
    public static func start(name: String = "prefetch") async throws -> RedisSentinels {
        let primary = try await RedisServer.start()
        var started: [RedisSentinelProcess] = []
        var replica: RedisServer?
        func stopAll() async {
            for sentinel in started { await sentinel.stop() }
            await replica?.stop()
            await primary.stop()
        }
        do {
            let copy = try await RedisServer.start(arguments: ["--replicaof", "127.0.0.1", "\(primary.port)"])
            replica = copy
            let linked = await eventually(within: 20) {
                await copy.cli(["INFO", "replication"])?.contains("master_link_status:up") == true
            }
            guard linked else { throw TestSetupError("the replica on port \(copy.port) never synced with its primary") }
            for _ in 0..<3 {
                let sentinel = try RedisSentinelProcess(monitoring: primary.port, name: name)
                try sentinel.start()
                started.append(sentinel)
            }
            let sentinels = started
            let acquainted = await eventually(within: 30) {
                for sentinel in sentinels {
                    guard await sentinel.field("num-slaves") == "1", await sentinel.field("num-other-sentinels") == "2" else {
                        return false
                    }
                }
                return true
            }
            guard acquainted else { throw TestSetupError("the sentinels never saw the replica and each other") }
            return RedisSentinels(name: name, primary: primary, replica: copy, sentinels: sentinels)
        } catch {
            await stopAll()
            throw error
        }
    }

    /// Kills the primary; within `seconds`, whether the sentinels named the replica as the primary.
    public func killPrimaryAndAwaitPromotion(within seconds: Double = 60) async -> Bool {
        await primary.stop()
        return await eventually(within: seconds) { await sentinels[0].primaryPort() == replica.port }
    }

    public func stop() async {
        for sentinel in sentinels { await sentinel.stop() }
        await replica.stop()
        await primary.stop()
    }
}
