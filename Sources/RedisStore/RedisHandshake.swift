/// What every new connection says first, on either transport (the pool's non-blocking `PooledConnection` and the
/// subscriber's blocking `RedisConnection`): `AUTH` with the endpoint's credentials (or, without credentials, `PING`,
/// so that a server that wants some says `NOAUTH` before the connection counts as open), then `SELECT` when the
/// database is not 0, sent as one pipeline. ``commands(for:)`` builds it and ``failure(_:endpoint:)`` reads the replies.
enum RedisHandshake {
    /// The handshake's commands for `endpoint`, in order.
    static func commands(for endpoint: RedisEndpoint) -> [[[UInt8]]] {
        var commands: [[String]] = []
        commands.append(endpoint.credentials?.authCommand ?? ["PING"])
        if endpoint.database != 0 { commands.append(["SELECT", String(endpoint.database)]) }
        return commands.map { $0.map { Array($0.utf8) } }
    }

    /// Why the results of ``commands(for:)`` (one per command, in order) mean the connection cannot be used; nil when
    /// it can. A refused `AUTH` and a `NOAUTH` are `.auth`; the password never appears in the message.
    static func failure(_ results: RedisCall.Results, endpoint: RedisEndpoint) -> RedisCallError? {
        var index = 0
        if let credentials = endpoint.credentials {
            switch results[index] {
            case .failure(let error):
                return RedisCallError(kind: error.kind, message: credentials.redacting(error.message))
            case .success(.error(let message)):
                return RedisCallError(
                    kind: .auth,
                    message: "Redis at \(endpoint.address) refused \(credentials.who): \(credentials.redacting(message))")
            case .success:
                index += 1
            }
        } else {
            switch results[index] {
            case .failure(let error):
                return error
            case .success(let reply):
                if let missing = RedisCallError(missingCredentials: reply, at: endpoint.address) { return missing }
                if case .error(let message) = reply {
                    return RedisCallError(kind: .connect, message: "Redis at \(endpoint.address) answered PING with \(message)")
                }
                index += 1
            }
        }
        if endpoint.database != 0 {
            switch results[index] {
            case .failure(let error):
                return error
            case .success(.error(let message)):
                return RedisCallError(kind: .connect, message: "cannot select database \(endpoint.database): \(message)")
            case .success:
                break
            }
        }
        return nil
    }
}
