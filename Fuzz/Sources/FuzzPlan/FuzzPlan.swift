// A page URL planned against a config (`Plan.make`: `HTTPURL(parsing:)`, `PageMatcher.match`, the query split, the
// page's parameter table and `Composer.compose`), what every trigger does with the URL a browser sends.
//
// The input is tried as a whole page URL, and as the query and then the path of a page of the fixed config below
// (patterns, exact pages, every method, body type, `params`, fixed names and a dependent), so the composer is reached.
// Checks, beyond no crash and no sanitizer report, the `PlanChecks` invariants: a request goes to its api's origin
// and path, has only the config's headers, keeps the config's fixed values, and is what the reference composer makes.
import FuzzSupport

@testable import PrefetchCore

/// Interfaces of every method and body type, with `params` and fixed names: the first two pages share them.
let shared = [
    #"{"name":"g","api":"http://api.example.com:8081/v1/data.json?role=x&#frag","method":"GET","urlParam":true,"bodyParam":true,"body":{"c":1,"_":2}}"#,
    #"{"name":"p","api":"https://api.example.com/v1/data.json?","method":"POST","urlParam":true,"bodyParam":true,"body":{"role":"u","n":null},"headers":{"X-Fixed":"1"}}"#,
    #"{"name":"f","api":"https://api.example.com/v1/form","method":"PUT","bodyParam":true,"bodyType":"form","params":["id","a","Z"]}"#,
    #"{"name":"d","api":"https://api.example.com/v1/d?x=1","method":"DELETE","bodyParam":true,"body":{"k":true}}"#,
    #"{"name":"q","api":"https://api.example.com/v1/q","method":"GET","urlParam":true,"params":["role","a"]}"#,
]

let config: PrefetchConfig = {
    let withDependent =
        shared + [
            #"{"name":"u","api":"https://api.example.com/v1/\u00e9?#","method":"PATCH","urlParam":true,"body":{"x":[1]}}"#,
            #"{"name":"dep","api":"https://api.example.com/v1/dep","method":"POST","urlParam":true,"bodyParam":true,"body":{"uid":"${g:/data/uid}","k":"v"},"query":{"u":"${g:/a~1b}"}}"#,
        ]
    // Without a dependent, every request of the page is composed from its template and the page's parameter table.
    let fromTemplates =
        shared + [
            #"{"name":"j","api":"https://api.example.com/v1/j","method":"POST","urlParam":true,"bodyParam":true,"params":["id","a","é"]}"#
        ]
    let pages = [
        #"{"url":"https://m.example.com/p/{id}","interfaces":[\#(withDependent.joined(separator: ","))]}"#,
        #"{"url":"https://m.example.com/r/{id}","interfaces":[\#(fromTemplates.joined(separator: ","))]}"#,
        #"{"url":"https://m.example.com/a/{x}.html","interfaces":[{"name":"a1","api":"https://api.example.com/a?x=1","method":"GET","urlParam":true}]}"#,
        #"{"url":"https://m.example.com/*/b","interfaces":[{"name":"b1","api":"https://api.example.com/b","method":"POST","bodyParam":true}]}"#,
        #"{"url":"https://m.example.com/{x}/{y}","interfaces":[{"name":"xy","api":"https://api.example.com/xy","method":"GET","urlParam":true,"bodyParam":true}]}"#,
        #"{"url":"https://m.example.com/help/new","interfaces":[{"name":"h","api":"https://m.example.com/xx.json","method":"POST","urlParam":true,"bodyParam":true,"body":{"cityId":123456}}]}"#,
        #"{"url":"https://m.example.com/e\u0301/{x}","interfaces":[{"name":"e","api":"https://api.example.com/e","method":"GET","urlParam":true}]}"#,
        #"{"url":"http://[::1]:8080/v6","interfaces":[{"name":"v6","api":"http://[::1]:9090/v6","method":"GET","urlParam":true}]}"#,
    ]
    let text = #"{"code":200,"data":{"name":"fuzz","version":"1","config":[\#(pages.joined(separator: ","))]}}"#
    do {
        return try ConfigLoader.parse(Array(text.utf8), source: "FuzzPlan").config
    } catch {
        fatalError("the fixed config does not load: \(error)")
    }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = inputText(data, size)
    for page in [text, "https://m.example.com/p/12?" + text, "https://m.example.com/r/7?" + text, "https://m.example.com/" + text] {
        guard let plan = try? Plan.make(page: page, config: config) else { continue }
        guard let url = try? HTTPURL(parsing: page) else {
            require(false, "a plan was made for \(page.debugDescription), which does not parse")
            continue
        }
        require(plan.pageURL == url, "the plan's page URL is not the parsed page")
        PlanChecks.check(plan, page: url, config: config)
    }
    return 0
}

@_cdecl("FuzzPlan_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc: argc, argv: argv, fuzz)
}
