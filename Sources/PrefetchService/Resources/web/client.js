/*
 * Prefetch page client: one call that uses the prefetched response when there is one and otherwise makes the
 * page's own request, so a page never breaks because of the prefetch service.
 *
 *   <script src="https://prefetch.example.com/v1/client.js"></script>
 *   const response = await PrefetchClient.get('https://m.example.com/api/info', {method: 'GET'});
 *   const data = await response.json();      // response.prefetch = {source: 'hit'|'joined'|'miss', reason}
 *
 * The ticket comes from options.ticket, else window.__PREFETCH_TICKET__ (injected by the shell), else the
 * page URL's ?prefetchTicket= (PrefetchClient.ticketParam). The service is the origin this script was loaded
 * from (PrefetchClient.base to change it). Calls to the service never send cookies: the ticket is the
 * capability. Any miss, error, slow answer (PrefetchClient.timeout ms beyond the wait) or unreachable service
 * falls back to fetch(options.url || api, options.init).
 */
(function (global) {
  'use strict';

  var script = global.document && global.document.currentScript;
  var client = {
    base: script && script.src ? new URL(script.src).origin : global.location.origin,
    ticketParam: 'prefetchTicket',
    /** Milliseconds the service may take beyond the wait before the page makes its own request. */
    timeout: 500,
    /** Called with every report: {api, name, source, reason, ms}. */
    onReport: null,
    /** The last 50 reports, oldest first. */
    reports: []
  };

  /** The ticket for this page open, or null. */
  client.ticket = function (options) {
    if (options && options.ticket) return options.ticket;
    if (global.__PREFETCH_TICKET__) return global.__PREFETCH_TICKET__;
    return new URLSearchParams(global.location.search).get(client.ticketParam);
  };

  function report(api, options, source, reason, started) {
    var entry = {api: api, name: options.name || null, source: source, reason: reason || null,
      ms: Math.round(performance.now() - started)};
    client.reports.push(entry);
    if (client.reports.length > 50) client.reports.shift();
    if (typeof client.onReport === 'function') {
      try { client.onReport(entry); } catch (ignored) { /* a broken hook must not break the page */ }
    }
    return entry;
  }

  /** Asks the service for the prefetched response; resolves {response} or {reason} and never rejects. */
  function askService(api, options, ticket) {
    var query = new URLSearchParams({api: api, method: (options.method || 'GET').toUpperCase()});
    if (options.name) query.set('name', options.name);
    if (options.wait != null) query.set('wait', String(options.wait));
    var url = (options.base || client.base) + '/v1/prefetch/' + encodeURIComponent(ticket) + '/data?' + query;
    var controller = new AbortController();
    // Without a wait the service waits up to the interface's timeout (3 s by default): cap it at 3 s.
    var timer = setTimeout(function () { controller.abort(); },
      (options.wait != null ? Number(options.wait) : 3000) + client.timeout);
    return fetch(url, {credentials: 'omit', cache: 'no-store', signal: controller.signal}).then(function (response) {
      clearTimeout(timer);
      var served = response.headers.get('X-Prefetch');
      if (served === 'hit' || served === 'joined') return {response: response, source: served};
      return {reason: response.headers.get('X-Prefetch-Reason') || 'status-' + response.status};
    }, function (error) {
      clearTimeout(timer);
      return {reason: error && error.name === 'AbortError' ? 'timeout' : 'service-down'};
    });
  }

  /**
   * The page's response for `api` (the interface URL as written in the prefetch config).
   * options: method, name, wait (ms the service may wait for an in-flight fetch), ticket, base,
   * url (the URL of the page's own request when it differs from api), init (the page's own fetch init).
   * Resolves a Response with .prefetch = {source, reason}; rejects only when the page's own fetch does.
   */
  client.get = function (api, options) {
    options = options || {};
    var started = performance.now();
    var init = Object.assign({method: options.method || 'GET'}, options.init || {});
    var own = function (reason) {
      var entry = report(api, options, 'miss', reason, started);
      return fetch(options.url || api, init).then(function (response) {
        response.prefetch = {source: 'miss', reason: entry.reason};
        return response;
      });
    };
    var ticket = client.ticket(options);
    if (!ticket) return own('no-ticket');
    return askService(api, options, ticket).then(function (answer) {
      if (!answer.response) return own(answer.reason);
      report(api, options, answer.source, null, started);
      answer.response.prefetch = {source: answer.source, reason: null};
      return answer.response;
    });
  };

  global.PrefetchClient = client;
})(window);
