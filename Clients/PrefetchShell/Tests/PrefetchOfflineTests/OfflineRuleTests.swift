import Foundation
import Testing

@testable import PrefetchOffline

/// The seed's rules as pure decisions: instants are plain values, nothing sleeps, no socket.
@Suite struct CheckScheduleTests {
    typealias Schedule = CheckSchedule<Moment>

    func at(_ seconds: Int) -> Moment { Moment(offset: .seconds(seconds)) }

    func schedule(mirror: Bool = true) -> Schedule {
        Schedule(interval: .seconds(30), failureThreshold: 5, providerRetry: .seconds(300), hasMirror: mirror)
    }

    @Test func checksAreAdmittedAtMostOncePer30Seconds() {
        var schedule = schedule()
        #expect(schedule.admit(at: at(0)) == .ask(.provider))
        #expect(schedule.record(normal: true, from: .provider) == .done)
        #expect(schedule.admit(at: at(1)) == .skip(.fatigue))
        #expect(schedule.admit(at: Moment(offset: .seconds(30) - .milliseconds(1))) == .skip(.fatigue))
        #expect(schedule.admit(at: at(30)) == .ask(.provider))
    }

    @Test func aCheckInFlightSkipsTheNextOneWhateverTheTime() {
        var schedule = schedule()
        #expect(schedule.admit(at: at(0)) == .ask(.provider))
        #expect(schedule.admit(at: at(100)) == .skip(.inFlight))
        _ = schedule.record(normal: false, from: .provider)
        #expect(schedule.admit(at: at(100)) == .ask(.provider))
    }

    /// Fails five checks in a row, 30 s apart; the schedule after them and the last check's next step.
    func failFiveTimes(_ schedule: inout Schedule) -> Schedule.Step {
        var last = Schedule.Step.done
        for check in 0..<5 {
            #expect(schedule.admit(at: at(check * 30)) == .ask(.provider))
            last = schedule.record(normal: false, from: .provider)
            if check < 4 { #expect(last == .done) }
        }
        return last
    }

    @Test func theFifthConsecutiveAbnormalAnswerSendsTheCheckToTheMirrorAndTheNextOnesStayThere() {
        var schedule = schedule()
        #expect(failFiveTimes(&schedule) == .ask(.mirror))
        #expect(schedule.record(normal: true, from: .mirror) == .done)
        #expect(schedule.onMirror)
        #expect(schedule.admit(at: at(150)) == .ask(.mirror))
        _ = schedule.record(normal: true, from: .mirror)
        // The provider was last asked at 120 s: until 420 s the checks go to the mirror alone.
        #expect(schedule.admit(at: at(390)) == .ask(.mirror))
        _ = schedule.record(normal: true, from: .mirror)
        // Then the provider is asked again, and its normal answer brings the checks back to it.
        #expect(schedule.admit(at: at(420)) == .ask(.provider))
        #expect(schedule.record(normal: true, from: .provider) == .done)
        #expect(!schedule.onMirror)
        #expect(schedule.admit(at: at(450)) == .ask(.provider))
    }

    @Test func aProviderStillFailingOnItsRetryHandsTheSameCheckToTheMirror() {
        var schedule = schedule()
        _ = failFiveTimes(&schedule)
        _ = schedule.record(normal: true, from: .mirror)
        #expect(schedule.admit(at: at(420)) == .ask(.provider))
        #expect(schedule.record(normal: false, from: .provider) == .ask(.mirror))
        _ = schedule.record(normal: false, from: .mirror)
        #expect(schedule.admit(at: at(450)) == .ask(.mirror))
    }

    @Test func aNormalAnswerResetsTheCountOfAbnormalOnes() {
        var schedule = schedule()
        for check in 0..<4 {
            _ = schedule.admit(at: at(check * 30))
            _ = schedule.record(normal: false, from: .provider)
        }
        _ = schedule.admit(at: at(120))
        _ = schedule.record(normal: true, from: .provider)
        for check in 5..<9 {
            _ = schedule.admit(at: at(check * 30))
            #expect(schedule.record(normal: false, from: .provider) == .done)
        }
        #expect(!schedule.onMirror)
    }

    @Test func withoutAMirrorTheProviderIsAlwaysAsked() {
        var schedule = schedule(mirror: false)
        for check in 0..<8 {
            #expect(schedule.admit(at: at(check * 30)) == .ask(.provider))
            #expect(schedule.record(normal: false, from: .provider) == .done)
        }
    }
}

@Suite struct MapRuleTests {
    func entry(
        _ version: String = "1", sha: String = "aa", md5: String? = nil, download: String? = nil, ctype: String = "text/css"
    )
        -> ResourceEntry
    {
        ResourceEntry(version: version, md5: md5, sha256: sha, download: download ?? "https://cdn.example/\(sha)", ctype: ctype)
    }

    @Test func versionsCompareAsText() {
        #expect(MapUpdate.isNewVersion("553", over: nil))
        #expect(!MapUpdate.isNewVersion("553", over: "553"))
        #expect(MapUpdate.isNewVersion("552", over: "553"))  // not "older": only different
        #expect(MapUpdate.isNewVersion("0553", over: "553"))
        #expect(MapUpdate.isNewVersion("10", over: "9"))
    }

    @Test func onlyNewAndChangedEntriesAreDownloaded() {
        let old = ResourceMap(
            version: "1",
            entries: [
                "https://a/same.js": entry(sha: "s1"), "https://a/version.js": entry("1", sha: "v1"),
                "https://a/sha.js": entry(sha: "h1"), "https://a/md5.js": entry(sha: "m1", md5: "x"),
                "https://a/moved.js": entry(sha: "d1", download: "https://cdn/old"), "https://a/type.js": entry(sha: "t1"),
                "https://a/gone.js": entry(sha: "g1"),
            ])
        let new = ResourceMap(
            version: "2",
            entries: [
                "https://a/same.js": entry(sha: "s1"), "https://a/version.js": entry("2", sha: "v1"),
                "https://a/sha.js": entry(sha: "h2"), "https://a/md5.js": entry(sha: "m1", md5: "y"),
                "https://a/moved.js": entry(sha: "d1", download: "https://cdn/new"),
                "https://a/type.js": entry(sha: "t1", ctype: "text/plain"), "https://a/new.js": entry(sha: "n1"),
            ])
        let update = MapUpdate(from: old, to: new, cacheKey: { $0.download })
        #expect(
            update.downloads == ["https://a/md5.js", "https://a/moved.js", "https://a/new.js", "https://a/sha.js", "https://a/version.js"])
        #expect(update.dropped == ["https://a/gone.js"])
        // The old bodies of changed entries and the dropped one's; the unchanged ones (and a changed type's) stay.
        #expect(
            update.deletions == [
                "https://cdn.example/g1", "https://cdn.example/h1", "https://cdn.example/m1", "https://cdn.example/v1", "https://cdn/old",
            ])
    }

    @Test func theFirstMapDownloadsEverythingAndDeletesNothing() {
        let new = ResourceMap(version: "1", entries: ["https://a/x.js": entry(sha: "x"), "https://a/y.js": entry(sha: "y")])
        let update = MapUpdate(from: nil, to: new, cacheKey: { $0.download })
        #expect(update.downloads == ["https://a/x.js", "https://a/y.js"])
        #expect(update.dropped.isEmpty && update.deletions.isEmpty)
    }

    @Test func aBodyStillNamedByAnUnchangedEntryIsNotDeleted() {
        let shared = "https://cdn/shared"
        let old = ResourceMap(
            version: "1",
            entries: ["https://a/x.js": entry(sha: "s", download: shared), "https://a/y.js": entry(sha: "s", download: shared)])
        let new = ResourceMap(version: "2", entries: ["https://a/x.js": entry(sha: "s", download: shared)])
        #expect(MapUpdate(from: old, to: new, cacheKey: { $0.download }).deletions.isEmpty)
    }

    @Test func aRequestMatchesAnEntryWithItsFragmentIgnored() throws {
        let page = "https://www.example.com/topic/v1/pub/danV9fm7RGVU.html?_stat_referer=index&_stat_area=banner_2"
        let map = ResourceMap(version: "1", entries: [page: entry(sha: "p"), "https://a/b.js#v2": entry(sha: "b")])
        #expect(map.entry(for: try #require(URL(string: page + "#param")))?.sha256 == "p")
        #expect(map.entry(for: try #require(URL(string: page)))?.sha256 == "p")
        // The key's own fragment is dropped too.
        #expect(map.entry(for: try #require(URL(string: "https://a/b.js")))?.sha256 == "b")
        // Everything else counts: another query, another case of path.
        #expect(map.entry(for: try #require(URL(string: page + "&x=1#param"))) == nil)
        #expect(map.entry(for: try #require(URL(string: "https://a/B.js"))) == nil)
    }
}

@Suite struct AnswerTests {
    func classify(_ json: String, status: Int = 200) -> CheckAnswer { CheckAnswer.classify(status: status, body: Data(json.utf8)) }

    @Test func theSeedsEnvelopeIsANormalAnswerWithAMap() throws {
        let answer = classify(
            """
            {"code":200,"data":{"version":"553","update":true,"resourcemap":{"https://x/a.js#f":{"version":"1",
            "md5":"0518C371936FD611FC3B897A76C11111","download":"https://cdn/a","ctype":"application/javascript;charset=UTF-8"}}}}
            """)
        guard case .normal(let version, let map?) = answer else {
            Issue.record("not a map: \(answer)")
            return
        }
        #expect(version == "553")
        #expect(map.entries["https://x/a.js"]?.md5 == "0518c371936fd611fc3b897a76c11111")
        #expect(map.entries["https://x/a.js"]?.ctype == "application/javascript;charset=UTF-8")
    }

    @Test func abnormalAnswers() {
        #expect(classify(#"{"code":500,"data":{"version":"1","update":false}}"#) == .abnormal(.code))
        #expect(classify(#"{"code":"503"}"#) == .abnormal(.code))
        #expect(classify(#"{"code":200,"data":{"version":"1","update":false}}"#, status: 502) == .abnormal(.httpStatus))
        #expect(classify("<html>") == .abnormal(.badAnswer))
        #expect(classify(#"{"code":200,"data":{"version":"2","update":true}}"#) == .abnormal(.badAnswer))
        #expect(classify(#"{"code":200}"#) == .abnormal(.badAnswer))
    }

    @Test func noUpdateAndNumericVersionsAndAMirrorsFileWithoutUpdate() {
        #expect(classify(#"{"code":200,"data":{"version":"7","update":false}}"#) == .normal(version: "7", map: nil))
        #expect(classify(#"{"code":200,"data":{"version":553,"update":false}}"#) == .normal(version: "553", map: nil))
        #expect(
            classify(#"{"code":200,"data":{"version":"8","resourcemap":{}}}"#)
                == .normal(version: "8", map: ResourceMap(version: "8", entries: [:])))
    }
}

@Suite struct CacheRuleTests {
    @Test func theLeastRecentlyUsedKeysAreEvictedToStayWithinTheCapacity() {
        var lru = LRUIndex<String>(capacity: 100)
        #expect(lru.insert("a", bytes: 40).isEmpty)
        #expect(lru.insert("b", bytes: 40).isEmpty)
        lru.touch("a")
        #expect(lru.insert("c", bytes: 40) == ["b"])
        #expect(lru.totalBytes == 80)
        #expect(lru.byRecency == ["a", "c"])
        #expect(lru.insert("d", bytes: 100) == ["a", "c"])
        #expect(lru.insert("huge", bytes: 101) == ["huge"])
        #expect(lru.byRecency == ["d"])
    }

    @Test func replacingAKeyCountsItsBytesOnce() {
        var lru = LRUIndex<String>(capacity: 100)
        _ = lru.insert("a", bytes: 60)
        #expect(lru.insert("a", bytes: 70).isEmpty)
        #expect(lru.totalBytes == 70)
        lru.remove("a")
        #expect(lru.totalBytes == 0 && lru.count == 0)
    }

    @Test func theMemoryLevelServesOnlyTheBodyOfTheSameHashesAndEmptiesOnAWarning() {
        var memory = MemoryLevel(capacity: 10)
        let entry = ResourceEntry(version: "1", sha256: "aa", download: "https://cdn/a", ctype: "text/css")
        memory.insert("https://cdn/a", bytes: Data("12345".utf8), entry: entry)
        #expect(memory.body("https://cdn/a", for: entry) == Data("12345".utf8))
        var changed = entry
        changed.sha256 = "bb"
        #expect(memory.body("https://cdn/a", for: changed) == nil)
        memory.insert("https://cdn/b", bytes: Data("123456".utf8), entry: entry)
        #expect(memory.body("https://cdn/a", for: entry) == nil)  // evicted: 5 + 6 > 10
        memory.removeAll()
        #expect(memory.totalBytes == 0 && memory.body("https://cdn/b", for: entry) == nil)
    }

    @Test func digestsAreTheStandardOnes() {
        #expect(Digests.sha256(Data("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Digests.md5(Data("abc".utf8)) == "900150983cd24fb0d6963f7d28e17f72")
    }

    @Test func aBodyIsTrustedOnlyWhenEveryHashOfItsEntryMatches() {
        let body = Data("abc".utf8)
        let sha = Digests.sha256(body)
        let md5 = Digests.md5(body)
        #expect(Integrity.verify(body, against: ResourceEntry(version: "1", md5: md5, sha256: sha, download: "d", ctype: "t")))
        #expect(
            !Integrity.verify(
                body, against: ResourceEntry(version: "1", md5: String(repeating: "0", count: 32), sha256: sha, download: "d", ctype: "t")))
        #expect(!Integrity.verify(Data("abd".utf8), against: ResourceEntry(version: "1", sha256: sha, download: "d", ctype: "t")))
        #expect(!Integrity.verify(body, against: ResourceEntry(version: "1", download: "d", ctype: "t")))
        let md5Only = ResourceEntry(version: "1", md5: md5, download: "d", ctype: "t")
        #expect(!Integrity.isCacheable(md5Only, policy: .sha256Required))
        #expect(Integrity.isCacheable(md5Only, policy: .md5Accepted))
    }
}
