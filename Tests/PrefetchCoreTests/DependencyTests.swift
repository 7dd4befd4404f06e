import HTTPTypes
import Testing

@testable import PrefetchCore

@Suite struct DependencyConfigTests {
    func page(_ interfaces: String...) -> String {
        #"{"code":200,"data":{"name":"t","version":"1","config":[{"url":"https://m.example.com/p","interfaces":[\#(interfaces.joined(separator: ","))]}]}}"#
    }

    let user = #"{"name":"user","api":"https://api.example.com/user","method":"GET"}"#

    @Test func referencesAreReadFromBodyHeadersAndQuery() throws {
        let text = page(
            user,
            #"{"name":"orders","api":"https://api.example.com/orders","method":"POST","body":{"uid":"${user:/data/uid}","deep":{"list":["x ${user:/a~1b}"]}},"headers":{"X-Uid":"${user:}"},"query":{"u":"${user:/data/uid}","n":7}}"#
        )
        let config = try ConfigLoader.parse(Array(text.utf8), source: "test").config
        let orders = try #require(config.pages.first?.interfaces.last)
        #expect(orders.dependsOn == ["user"])
        #expect(orders.references.map(\.description) == ["${user:/data/uid}", "${user:/a~1b}", "${user:}", "${user:/data/uid}"])
        #expect(orders.references[1].pointer.tokens == ["a/b"])
        #expect(orders.query.map(\.name) == ["u", "n"] && orders.query.map(\.value) == ["${user:/data/uid}", "7"])
        let plan = try Plan.make(page: "https://m.example.com/p", config: config)
        #expect(plan.requests[1].dependencies == [0])
        #expect(plan.requests[0].dependencies.isEmpty)
    }

    @Test func badReferencesAreProblemsAtTheirPaths() {
        let interfaces = "data.config[0].interfaces"
        #expect(
            problems(page(user, #"{"name":"a","api":"https://api.example.com/a","method":"GET","query":{"x":"${nobody:/id}"}}"#))
                == [#"\#(interfaces)[1].query.x: references "nobody", which is not an interface of this page"#])
        #expect(
            problems(page(user, #"{"name":"a","api":"https://api.example.com/${user:/host}","method":"GET"}"#))
                == ["\(interfaces)[1].api: may not hold a reference: an answer never chooses where a request goes"])
        #expect(
            problems(page(user, #"{"name":"a","api":"https://api.example.com/a","method":"GET","query":{"x":"${user:data}"}}"#))
                == [#"\#(interfaces)[1].query.x: has "data", which is not a JSON pointer (empty, or starting with "/")"#])
        #expect(
            problems(page(user, #"{"name":"a","api":"https://api.example.com/a","method":"POST","body":{"x":"${user:/id"}}"#))
                == [#"\#(interfaces)[1].body.x: has "${" without a closing "}""#])
        #expect(
            problems(
                page(
                    user,
                    #"{"name":"a","api":"https://api.example.com/a","method":"GET","headers":{"Authorization":"Bearer ${user:/token}"}}"#))
                == [
                    "\(interfaces)[1].headers.Authorization: may not take a value from another answer: credentials come from the caller only"
                ])
        #expect(
            problems(page(user, #"{"name":"a","api":"https://api.example.com/a","method":"GET","query":{"x":{"y":1}}}"#))
                == ["\(interfaces)[1].query.x: must be a string, number or boolean, got an object"])
        // Names are the config's: a reference in a query or body member name (at any depth) is refused, not sent as text.
        let inName = "a name may not hold a reference: an answer fills values only, never the names the config fixes"
        #expect(
            problems(page(user, #"{"name":"a","api":"https://api.example.com/a","method":"GET","query":{"${user:/k}":"v"}}"#))
                == ["\(interfaces)[1].query.${user:/k}: \(inName)"])
        #expect(
            problems(page(user, #"{"name":"a","api":"https://api.example.com/a","method":"POST","body":{"o":{"${user:/k}":1}}}"#))
                == ["\(interfaces)[1].body.o.${user:/k}: \(inName)"])
    }

    @Test func cyclesAreProblems() {
        let a = #"{"name":"a","api":"https://api.example.com/a","method":"GET","query":{"b":"${b:/id}"}}"#
        let b = #"{"name":"b","api":"https://api.example.com/b","method":"GET","query":{"a":"${a:/id}"}}"#
        let found = problems(page(a, b))
        #expect(found.count == 1)
        #expect(found.first?.contains("a cycle (a → b → a)") == true, "\(found)")
        let selfish = #"{"name":"s","api":"https://api.example.com/s","method":"GET","query":{"s":"${s:/id}"}}"#
        #expect(problems(page(selfish)).first?.contains("a cycle (s → s)") == true)
    }
}

@Suite struct DependencyResolutionTests {
    static let answer = try! JSONParser.parse(
        #"{"data":{"uid":"u&1 2/é","n":42,"ok":true,"obj":{"k":1},"list":[10,20]},"a/b":"slash","~":"tilde"}"#)

    func values(_ references: [Reference]) -> [Reference: JSONValue] {
        var out: [Reference: JSONValue] = [:]
        for reference in references { out[reference] = reference.pointer.resolve(in: Self.answer) }
        return out
    }

    @Test func pointersFollowRFC6901() throws {
        func at(_ text: String) -> JSONValue? { JSONPointer(text)?.resolve(in: Self.answer) }
        #expect(at("") == Self.answer)
        #expect(at("/data/uid") == .string("u&1 2/é"))
        #expect(at("/data/list/1") == .number("20"))
        #expect(at("/a~1b") == .string("slash") && at("/~0") == .string("tilde"))
        #expect(at("/data/list/01") == nil && at("/data/list/2") == nil && at("/data/list/-") == nil && at("/data/none") == nil)
        #expect(JSONPointer("data") == nil && JSONPointer("/a~2") == nil && JSONPointer("/a~") == nil)
    }

    @Test func resolvingReplacesEveryReference() throws {
        var interface = try #require(
            try singleInterfaceConfig(
                page: "https://m.example.com/p",
                #"{"name":"o","api":"https://api.example.com/o?v=1","method":"POST","body":{"n":"N","ok":"OK","obj":"OBJ","text":"TEXT"},"headers":{"X-Uid":"H"},"query":{"uid":"Q"}}"#
            ).pages.first?.interfaces.first)
        interface.body = JSONObject([
            .init(name: "n", value: .string("${x:/data/n}")), .init(name: "ok", value: .string("${x:/data/ok}")),
            .init(name: "obj", value: .string("${x:/data/obj}")), .init(name: "text", value: .string("n=${x:/data/n} ${x:/data/uid}")),
        ])
        interface.headers = HTTPFields([HTTPField(name: HTTPField.Name("X-Uid")!, value: "${x:/data/uid}")])
        interface.query = [("uid", "${x:/data/uid}")]
        let references = ["/data/n", "/data/ok", "/data/obj", "/data/uid"].map { Reference(interface: "x", pointer: JSONPointer($0)!) }
        interface.references = references
        let resolved = try interface.resolving(values(references))
        #expect(resolved.body["n"] == .number("42") && resolved.body["ok"] == .bool(true))
        #expect(resolved.body["obj"] == .object(JSONObject([.init(name: "k", value: .number("1"))])))
        #expect(resolved.body["text"] == .string("n=42 u&1 2/é"))
        #expect(resolved.headers[HTTPField.Name("X-Uid")!] == "u&1 2/é")
        let request = Composer.compose(interface: resolved, pairs: [])
        #expect(request.url == "https://api.example.com/o?v=1&uid=u%261+2%2F%C3%A9")
        #expect(request.body?.contains(#""obj":{"k":1}"#) == true)

        // As text, an object is not a value; in a query it cannot be one either.
        var textual = interface
        textual.query = [("o", "${x:/data/obj}")]
        #expect(throws: DependencyError.self) { try textual.resolving(values(references)) }
        var missing = interface
        missing.body = JSONObject([.init(name: "m", value: .string("${x:/data/missing}"))])
        #expect(throws: DependencyError(code: .dependencyValue, message: "o needs ${x:/data/missing}, and x's answer has nothing there")) {
            try missing.resolving(values(references))
        }
        var hostile = interface
        hostile.headers = HTTPFields([HTTPField(name: HTTPField.Name("X-Uid")!, value: "${x:/line}")])
        let withBreak: [Reference: JSONValue] = [Reference(interface: "x", pointer: JSONPointer("/line")!): .string("a\r\nSet-Cookie: b=1")]
        #expect(throws: DependencyError.self, "a value with a line break never becomes a header") {
            try hostile.resolving(withBreak)
        }
    }
}
