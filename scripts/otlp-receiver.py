#!/usr/bin/env python3
"""A small OTLP/HTTP receiver for the service's tests: listens on 127.0.0.1 (a free port, printed as
"otlp receiver listening on 127.0.0.1:PORT"), accepts protobuf export requests on /v1/traces and /v1/metrics, and
prints one JSON line per span ({"span": {traceId, spanId, parentSpanId, name, kind, attributes, status, links}}) and per
metric ({"metric": name}) as they arrive. Stops on SIGTERM. Needs opentelemetry-proto (scripts/ensure-deps.sh test).
"""
import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def span_record(span):
    return {"span": {
        "traceId": span.trace_id.hex(), "spanId": span.span_id.hex(), "parentSpanId": span.parent_span_id.hex(),
        "name": span.name, "kind": span.kind, "attributes": {a.key: value(a.value) for a in span.attributes},
        "status": span.status.code,
        "links": [{"traceId": link.trace_id.hex(), "spanId": link.span_id.hex()} for link in span.links]}}


# Per signal: the export request and answer messages, the path from a request to its items, and each item's line.
SIGNALS = {
    "/v1/traces": (trace_service_pb2.ExportTraceServiceRequest, trace_service_pb2.ExportTraceServiceResponse,
                   ("resource_spans", "scope_spans", "spans"), span_record),
    "/v1/metrics": (metrics_service_pb2.ExportMetricsServiceRequest, metrics_service_pb2.ExportMetricsServiceResponse,
                    ("resource_metrics", "scope_metrics", "metrics"), lambda metric: {"metric": metric.name}),
}


def items(message, path):
    if not path:
        yield message
        return
    for child in getattr(message, path[0]):
        yield from items(child, path[1:])


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path not in SIGNALS:
            self.send_error(404)
            return
        request_type, answer_type, path, record = SIGNALS[self.path]
        request = request_type()
        request.ParseFromString(body)
        for item in items(request, path):
            emit(record(item))
        reply = answer_type().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("otlp receiver listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
