import Testing

@testable import ResourceProvider

// The tag scan on the shapes real pages have: generated markup with attributes in any order, templates with
// newlines inside tags, legacy uppercase markup, responsive images, commented-out and inline scripts.

@Suite struct HTMLReferenceScannerTests {
    @Test func aBundlerOutputPageWithAttributesInAnyOrderAndNewlinesInsideTags() {
        let html = #"""
            <!doctype html>
            <html lang="zh-CN">
            <head>
              <meta charset="utf-8">
              <meta name="viewport" content="width=device-width,initial-scale=1">
              <title>Shop <img src="/not-an-image.png"></title>
              <link rel="icon" href="/favicon.ico">
              <link href="/static/css/app.8f3a1c.css" rel="stylesheet">
              <link
                crossorigin="anonymous"
                rel='preload'
                as="script"
                href="/static/js/chunk-vendors.js">
              <link rel=preload as=font href=/static/fonts/a.woff2 crossorigin>
              <link rel="modulepreload" href="./static/js/entry.mjs">
              <script defer="defer" type="module"
                      src="/static/js/app.5e2b.js"></script>
            </head>
            <body>
              <div id="app"></div>
              <img alt="logo"
                   src="img/logo.png" width=120>
            </body>
            </html>
            """#
        let found = HTMLReferenceScanner.scan(html)
        #expect(found.base == nil)
        #expect(
            found.urls == [
                "/static/css/app.8f3a1c.css", "/static/js/chunk-vendors.js", "./static/js/entry.mjs", "/static/js/app.5e2b.js",
                "img/logo.png",
            ])
    }

    @Test func uppercaseLegacyMarkupUnquotedValuesAndCharacterReferences() {
        let html = #"""
            <HTML><HEAD>
            <LINK REL="StyleSheet" TYPE="text/css" HREF="/css/main.css?v=3&amp;lang=en">
            <SCRIPT LANGUAGE=JavaScript SRC=/js/legacy.js></SCRIPT>
            </HEAD><BODY BGCOLOR=#ffffff>
            <IMG SRC='/img/a&#46;gif' BORDER=0><img src="/img/b.gif" src="/img/ignored.gif">
            <img data-src="/lazy.png" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
            <a href="javascript:void(0)"><img src="#top"></a>
            </BODY></HTML>
            """#
        #expect(
            HTMLReferenceScanner.scan(html).urls == ["/css/main.css?v=3&lang=en", "/js/legacy.js", "/img/a.gif", "/img/b.gif"])
    }

    @Test func commentsAndInlineScriptAndStyleBodiesAreNotMarkup() {
        let html = #"""
            <!-- <script src="/old/jquery.js"></script> -->
            <!--[if lt IE 9]><script src="/js/html5shiv.js"></script><![endif]-->
            <style>
              .hero { background: url(/img/hero.jpg) } /* <img src="/in-style.png"> */
            </style>
            <script>
              var tpl = "<img src=x>" + '<script src="/in-string.js"></scr' + 'ipt>';
              document.write('<link rel="stylesheet" href="/written.css">');
            </SCRIPT >
            <script type="text/template"><img src="/template.png"></script>
            <textarea><img src="/typed.png"></textarea>
            <script src="/js/after.js"></script>
            """#
        #expect(HTMLReferenceScanner.scan(html).urls == ["/js/after.js"])
    }

    @Test func srcsetCandidatesWithWidthAndDensityDescriptors() {
        let html = #"""
            <picture>
              <source type="image/webp" srcset="/img/p-480.webp 480w, /img/p-960.webp 960w">
              <img src="/img/p-480.jpg"
                   srcset="/img/p-480.jpg 1x,/img/p-960.jpg 2x , /img/p,comma.jpg 3x"
                   sizes="(max-width: 600px) 480px, 960px">
            </picture>
            <img srcset="/img/only.png">
            """#
        #expect(
            HTMLReferenceScanner.scan(html).urls == [
                "/img/p-480.webp", "/img/p-960.webp", "/img/p-480.jpg", "/img/p-960.jpg", "/img/p,comma.jpg", "/img/only.png",
            ])
    }

    @Test func theFirstBaseHrefIsReported() {
        let html = #"<head><BASE target=_self HREF="https://shop.example/assets/"><base href="/other/"><script src="a.js"></script>"#
        let found = HTMLReferenceScanner.scan(html)
        #expect(found.base == "https://shop.example/assets/")
        #expect(found.urls == ["a.js"])
    }

    @Test func resolutionKeepsOnlyTheSameHostOnTheAllowListWithoutFragments() {
        let html = #"""
            <base href="/shop/v2/">
            <script src="//static.example/cdn-relative.js"></script>
            <script src="//shop.example/protocol-relative.js"></script>
            <script src="https://cdn.jsdelivr.net/npm/vue@3/dist/vue.global.js"></script>
            <link rel="stylesheet" href="https://shop.example:8443/other-port.css">
            <link rel="stylesheet" href="http://shop.example/plain-http.css">
            <img src="img/a.png#frag"><img src="img/a.png"><img src="../up.png">
            <img src="https://user:pw@shop.example/secret.png">
            """#
        let urls = PageDiscovery.resources(
            in: html, page: "https://shop.example/shop/home", allowHosts: ["shop.example", "static.example"])
        #expect(
            urls == [
                "https://shop.example/protocol-relative.js", "https://shop.example/shop/v2/img/a.png", "https://shop.example/shop/up.png",
            ])
    }

    @Test func aPageOffTheAllowListAddsNothingAndTheCountIsCapped() {
        let many = (0..<100).map { "<img src=\"/i\($0).png\">" }.joined()
        #expect(PageDiscovery.resources(in: many, page: "https://shop.example/", allowHosts: ["static.example"]).isEmpty)
        let capped = PageDiscovery.resources(in: many, page: "https://shop.example/", allowHosts: ["shop.example"])
        #expect(capped.count == PageDiscovery.maximumPerPage)
        #expect(capped.first == "https://shop.example/i0.png")
    }

    @Test func truncatedMarkupEndsTheScanWithoutACrash() {
        #expect(HTMLReferenceScanner.scan("<script src=\"/a.js\"></script><img src=\"/b").urls == ["/a.js", "/b"])
        #expect(HTMLReferenceScanner.scan("<!-- <img src=/x.png>").urls.isEmpty)
        #expect(HTMLReferenceScanner.scan("<script>var a = '<img src=/x.png>'").urls.isEmpty)
        #expect(HTMLReferenceScanner.scan("<").urls.isEmpty)
        #expect(HTMLReferenceScanner.scan("<img src=").urls.isEmpty)
    }
}
