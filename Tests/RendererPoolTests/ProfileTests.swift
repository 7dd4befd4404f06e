import Foundation
import Logging
import Testing

@testable import RendererPool

@Suite struct ProfileTests {
    @Test func emptyJSONTakesEveryDefault() throws {
        let profile = try JSONDecoder().decode(RendererProfile.self, from: Data("{}".utf8))
        #expect(profile == RendererProfile())
        #expect(profile.minIdle == 1)
        #expect(profile.maxSize == 4)
        #expect(profile.maxUses == 50)
        #expect(profile.maxLifetime == 600)
        #expect(profile.lifetimeJitter == 0.1)
        #expect(profile.idleTimeout == 300)
        #expect(profile.acquireTimeout == 2000)
        #expect(profile.leaseTimeout == 60)
        #expect(profile.kind == .modelled)
        #expect(profile.problems(path: "renderers.main").isEmpty)
    }

    @Test func partialJSONOverridesOnlyWhatItNames() throws {
        let json = #"{"kind":"process","command":["/bin/sh","r.sh"],"maxSize":2,"minIdle":2,"resetLine":"reset"}"#
        let profile = try JSONDecoder().decode(RendererProfile.self, from: Data(json.utf8))
        #expect(profile.kind == .process)
        #expect(profile.command == ["/bin/sh", "r.sh"])
        #expect(profile.maxSize == 2)
        #expect(profile.maxUses == 50)
        #expect(profile.effectiveReadyLine == "ready")
        #expect(profile.resetLine == "reset")
        #expect(profile.problems(path: "renderers.p").isEmpty)
    }

    @Test func problemsNameTheJSONPath() throws {
        let json = #"{"minIdle":2,"maxSize":1,"lifetimeJitter":1.5,"failureRate":1}"#
        let profile = try JSONDecoder().decode(RendererProfile.self, from: Data(json.utf8))
        let problems = profile.problems(path: "renderers.main")
        #expect(problems.contains("renderers.main.maxSize: must be >= minIdle (2), got 1"))
        #expect(problems.contains("renderers.main.lifetimeJitter: must be in 0..<1, got 1.5"))
        #expect(problems.contains("renderers.main.failureRate: must be in 0..<1, got 1"))
        #expect(problems.count == 3)
    }

    @Test func unknownKindAndMissingCommandAreReported() throws {
        var profile = RendererProfile()
        profile.kind = RendererKind(rawValue: "webkit")
        #expect(profile.problems(path: "r.x") == [#"r.x.kind: must be one of modelled, process, got "webkit""#])
        profile.kind = .process
        profile.readyPort = 70000
        let problems = profile.problems(path: "r.x")
        #expect(problems.contains("r.x.command: must name an executable for kind process, got []"))
        #expect(problems.contains("r.x.readyPort: must be in 1...65535, got 70000"))
    }

    @Test func poolsRefuseInvalidProfilesListingEveryProblem() {
        var bad = RendererProfile()
        bad.maxSize = 0
        #expect(throws: PoolError.self) {
            try RendererPools(profiles: ["good": RendererProfile(), "bad": bad], logger: .init(label: "test"))
        }
        do {
            _ = try RendererPools(profiles: ["bad": bad], logger: .init(label: "test"))
        } catch {
            #expect(error.code == .invalidProfile)
            #expect(error.message.contains("renderers.bad.maxSize: must be >= 1, got 0"))
        }
    }
}
