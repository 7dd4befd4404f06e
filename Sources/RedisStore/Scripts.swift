import Digests

/// A Lua script run atomically by Redis: sent by SHA-1 (`EVALSHA`), and in full only when the server does not have
/// it cached yet (`NOSCRIPT`, e.g. after a restart).
struct LuaScript: Sendable, Hashable {
    let source: String
    let sha: String

    init(_ source: String) {
        self.source = source
        self.sha = SHA1.hash(data: Array(source.utf8)).map { byte in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]])
        }.joined()
    }
}

/// The store's scripts. Keys per store key: `E` the value, `L` the leader lock, `T` the tombstone (why the value
/// is gone: `expired`, `consumed`, `evicted` or `invalidated`). Values start with a kind byte and a 2-byte label
/// length (see `EntryCodec`). Every call's keys, the names it builds and the channel it announces on share one
/// group's hash tag (see `KeySpace`), so each runs in one slot, as Redis Cluster requires.
enum Scripts {
    /// KEYS E L T; ARGV lockValue lockAgeMs. `fresh` while a value exists; otherwise takes the lock (`leader`,
    /// clearing the previous generation's tombstone) unless another flight holds it (`joined`).
    static let begin = LuaScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 1 then return 'fresh' end
        if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
          redis.call('DEL', KEYS[3])
          return 'leader'
        end
        return 'joined'
        """)

    /// KEYS E L T index*; ARGV lockValue value keepMs tombstoneMs channel message digest groupPrefix. Only the lock
    /// holder completes: releases the lock, keeps the value for keepMs (0: not kept), leaves an `expired` tombstone
    /// that outlives it, records the digest in each index set (the identity's, the surrogate keys'; see `KeySpace`),
    /// each living at least as long as the value, and announces the completion on the group's shard channel
    /// (`SPUBLISH`). Returns 1, or 0 for a stale or
    /// unknown lock. An index set keeps the digests of values that expired until it expires itself, so each addition
    /// also removes those among three random members: a set holds about one and a half times its live values.
    static let complete = LuaScript(
        """
        if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
        redis.call('DEL', KEYS[2])
        local keep = tonumber(ARGV[3])
        if keep > 0 then
          redis.call('SET', KEYS[1], ARGV[2], 'PX', keep)
          redis.call('SET', KEYS[3], 'expired', 'PX', keep + tonumber(ARGV[4]))
          for i = 4, #KEYS do
            redis.call('SADD', KEYS[i], ARGV[7])
            if redis.call('PTTL', KEYS[i]) < keep then redis.call('PEXPIRE', KEYS[i], keep) end
            for _, member in ipairs(redis.call('SRANDMEMBER', KEYS[i], 3)) do
              if redis.call('EXISTS', ARGV[8] .. ':e:' .. member) == 0 then redis.call('SREM', KEYS[i], member) end
            end
          end
        end
        redis.call('SPUBLISH', ARGV[5], ARGV[6])
        return 1
        """)

    /// KEYS L; ARGV lockValue. Releases the lock only if the caller still holds it.
    static let abandon = LuaScript(
        """
        if redis.call('GET', KEYS[1]) == ARGV[1] then
          redis.call('DEL', KEYS[1])
          return 1
        end
        return 0
        """)

    /// KEYS E L T; ARGV tombstoneMs. {1, value, pttl} for a value (a no-store one is deleted in the same step and
    /// leaves a `consumed` tombstone, so exactly one reader across all replicas gets it); {2} while a flight holds
    /// the lock; {3, reason} otherwise.
    static let read = LuaScript(
        """
        local v = redis.call('GET', KEYS[1])
        if v then
          if string.sub(v, 1, 1) == 'N' then
            redis.call('DEL', KEYS[1])
            redis.call('SET', KEYS[3], 'consumed', 'PX', ARGV[1])
            return {1, v, -1}
          end
          return {1, v, redis.call('PTTL', KEYS[1])}
        end
        if redis.call('EXISTS', KEYS[2]) == 1 then return {2} end
        local t = redis.call('GET', KEYS[3])
        if t then return {3, t} end
        return {3, 'not-triggered'}
        """)

    /// KEYS (target, tombstone) pairs of one group; ARGV tombstoneMs channel digestLength keptLabel*. Deletes every
    /// value or lock whose label is not kept, leaves an `evicted` tombstone, announces it on the group's channel, and
    /// returns the dropped digests.
    static let retain = LuaScript(
        """
        local keep = {}
        for i = 4, #ARGV do keep[ARGV[i]] = true end
        local digestLength = tonumber(ARGV[3])
        local dropped = {}
        for i = 1, #KEYS, 2 do
          local v = redis.call('GET', KEYS[i])
          if v and #v >= 3 then
            local n = string.byte(v, 2) * 256 + string.byte(v, 3)
            local label = string.sub(v, 4, 3 + n)
            if not keep[label] then
              redis.call('DEL', KEYS[i])
              redis.call('SET', KEYS[i + 1], 'evicted', 'PX', ARGV[1])
              local digest = string.sub(KEYS[i], -digestLength)
              redis.call('SPUBLISH', ARGV[2], digest)
              dropped[#dropped + 1] = digest
            end
          end
        end
        return dropped
        """)
}

extension Scripts {
    /// KEYS S (an index set of one group); ARGV groupPrefix tombstoneMs. Drops every value whose digest the set
    /// holds (all of the set's group), leaving an
    /// `invalidated` tombstone, deletes the set, and returns the digests of the values it dropped. Locks (flights in
    /// progress) are not touched.
    static let invalidateIndexed = LuaScript(
        """
        local dropped = {}
        for _, digest in ipairs(redis.call('SMEMBERS', KEYS[1])) do
          if redis.call('DEL', ARGV[1] .. ':e:' .. digest) == 1 then
            redis.call('SET', ARGV[1] .. ':t:' .. digest, 'invalidated', 'PX', ARGV[2])
            dropped[#dropped + 1] = digest
          end
        end
        redis.call('DEL', KEYS[1])
        return dropped
        """)

    /// KEYS (value, tombstone) pairs of one group; ARGV tombstoneMs digestLength label. Drops every value whose label
    /// is `label`,
    /// leaving an `invalidated` tombstone, and returns the digests of the values it dropped.
    static let invalidateLabel = LuaScript(
        """
        local dropped = {}
        local digestLength = tonumber(ARGV[2])
        for i = 1, #KEYS, 2 do
          local v = redis.call('GET', KEYS[i])
          if v and #v >= 3 then
            local n = string.byte(v, 2) * 256 + string.byte(v, 3)
            if string.sub(v, 4, 3 + n) == ARGV[3] then
              redis.call('DEL', KEYS[i])
              redis.call('SET', KEYS[i + 1], 'invalidated', 'PX', ARGV[1])
              dropped[#dropped + 1] = string.sub(KEYS[i], -digestLength)
            end
          end
        end
        return dropped
        """)
}

/// One script call, ready to pipeline: `tail` is what follows the script's SHA or source in `EVALSHA`/`EVAL`.
struct ScriptCall: Sendable, Hashable {
    let script: LuaScript
    let tail: [[UInt8]]

    init(_ script: LuaScript, keys: [[UInt8]], arguments: [[UInt8]]) {
        self.script = script
        self.tail = [Array(String(keys.count).utf8)] + keys + arguments
    }

    init(_ script: LuaScript, keys: [String], arguments: [[UInt8]]) {
        self.init(script, keys: keys.map { Array($0.utf8) }, arguments: arguments)
    }
}
