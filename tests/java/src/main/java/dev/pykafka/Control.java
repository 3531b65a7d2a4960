package dev.pykafka;

import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The broker's control endpoint (HTTP/JSON, README "The control endpoint" and "Testing clients") from
 * Java: fault rules, brokers down/up, leaders and coordinators moved, the request log. Answers are
 * parsed by the small JSON reader below (maps, lists, strings, longs, doubles, booleans, null).
 */
final class Control {
    final String url;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    Control(String url) {
        this.url = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
    }

    Object call(String method, String path, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url + path)).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json");
        b.method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        HttpResponse<String> r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) {
            throw new AssertionError(method + " " + path + " " + (body == null ? "" : body) + ": HTTP "
                    + r.statusCode() + " " + r.body());
        }
        return Json.parse(r.body());
    }

    @SuppressWarnings("unchecked")
    Map<String, Object> post(String path, String body) throws Exception {
        return (Map<String, Object>) call("POST", path, body);
    }

    @SuppressWarnings("unchecked")
    Map<String, Object> get(String path) throws Exception {
        return (Map<String, Object>) call("GET", path, null);
    }

    // ---- librdkafka's mock vocabulary -------------------------------------------------------------

    /** rd_kafka_mock_push_request_errors, scoped to one transactional id (and a broker, if >= 0). */
    void push(String api, String txnId, int broker, String... errors) throws Exception {
        StringBuilder errs = new StringBuilder();
        for (String e : errors) {
            errs.append(errs.length() == 0 ? "" : ",").append(e.startsWith("{") ? e : Json.quote(e));
        }
        post("/faults", "{\"api\":" + Json.quote(api) + ",\"transactional_id\":" + Json.quote(txnId)
                + (broker >= 0 ? ",\"broker\":" + broker : "") + ",\"errors\":[" + errs + "]}");
    }

    /** Any rule, as JSON. */
    void addRule(String json) throws Exception {
        post("/faults", json);
    }

    void clearFaults() throws Exception {
        call("DELETE", "/faults", null);
    }

    /** What runs while a broker is down. */
    interface WhileDown {
        void run() throws Exception;
    }

    /** Takes the broker down, runs this, and brings the broker back up however it ends. */
    void whileDown(int id, WhileDown body) throws Exception {
        post("/brokers/" + id + "/down", "{}");
        try {
            body.run();
        } finally {
            post("/brokers/" + id + "/up", "{}");
        }
    }

    /** The leader of the transactional id's __transaction_state partition. */
    int txnCoordinator(String txnId) throws Exception {
        return ((Number) get("/coordinators/transaction/" + enc(txnId)).get("leader")).intValue();
    }

    /** The ISR of the transactional id's __transaction_state partition. */
    List<Integer> txnCoordinatorIsr(String txnId) throws Exception {
        Map<String, Object> c = get("/coordinators/transaction/" + enc(txnId));
        return isr((String) c.get("topic"), ((Number) c.get("partition")).intValue());
    }

    void setTxnCoordinator(String txnId, int broker) throws Exception {
        post("/coordinators/transaction/" + enc(txnId), "{\"broker\":" + broker + "}");
    }

    @SuppressWarnings("unchecked")
    Map<String, Object> partition(String topic, int partition) throws Exception {
        List<Object> parts = (List<Object>) get("/topics/" + enc(topic)).get("partitions");
        return (Map<String, Object>) parts.get(partition);
    }

    int leader(String topic, int partition) throws Exception {
        return ((Number) partition(topic, partition).get("leader")).intValue();
    }

    @SuppressWarnings("unchecked")
    List<Integer> isr(String topic, int partition) throws Exception {
        List<Integer> out = new ArrayList<>();
        for (Object o : (List<Object>) partition(topic, partition).get("isr")) {
            out.add(((Number) o).intValue());
        }
        return out;
    }

    void setLeader(String topic, int partition, int broker) throws Exception {
        post("/topics/" + enc(topic) + "/partitions/" + partition + "/leader", "{\"broker\":" + broker + "}");
    }

    /** The request log, oldest first: GET /requests?api=...&transactional_id=... */
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> requests(String api, String txnId) throws Exception {
        Map<String, Object> r = get("/requests?api=" + enc(api) + "&transactional_id=" + enc(txnId) + "&limit=10000");
        List<Map<String, Object>> out = new ArrayList<>();
        for (Object o : (List<Object>) r.get("requests")) {
            out.add((Map<String, Object>) o);
        }
        return out;
    }

    static String enc(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8);
    }

    /** A field of a request-log entry as a string ("api_version" -> "5", "error" -> "NONE"). */
    static String str(Map<String, Object> entry, String field) {
        return String.valueOf(entry.get(field));
    }

    static int integer(Map<String, Object> entry, String field) {
        Object v = entry.get(field);
        if (!(v instanceof Number n)) {
            throw new AssertionError("request log entry has no " + field + ": " + entry);
        }
        return n.intValue();
    }

    /** A JSON reader for the endpoint's answers. */
    static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        static Object parse(String text) {
            Json j = new Json(text);
            Object v = j.value();
            j.ws();
            if (j.i != j.s.length()) {
                throw new IllegalArgumentException("trailing data at " + j.i + " in " + text);
            }
            return v;
        }

        static String quote(String v) {
            StringBuilder b = new StringBuilder("\"");
            for (char c : v.toCharArray()) {
                if (c == '"' || c == '\\') {
                    b.append('\\').append(c);
                } else if (c < 0x20) {
                    b.append(String.format("\\u%04x", (int) c));
                } else {
                    b.append(c);
                }
            }
            return b.append('"').toString();
        }

        private void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private Object value() {
            ws();
            char c = s.charAt(i);
            switch (c) {
                case '{': {
                    i++;
                    Map<String, Object> m = new LinkedHashMap<>();
                    ws();
                    if (s.charAt(i) == '}') {
                        i++;
                        return m;
                    }
                    while (true) {
                        ws();
                        String k = string();
                        ws();
                        expect(':');
                        m.put(k, value());
                        ws();
                        if (s.charAt(i) == ',') {
                            i++;
                        } else {
                            expect('}');
                            return m;
                        }
                    }
                }
                case '[': {
                    i++;
                    List<Object> l = new ArrayList<>();
                    ws();
                    if (s.charAt(i) == ']') {
                        i++;
                        return l;
                    }
                    while (true) {
                        l.add(value());
                        ws();
                        if (s.charAt(i) == ',') {
                            i++;
                        } else {
                            expect(']');
                            return l;
                        }
                    }
                }
                case '"':
                    return string();
                case 't':
                    i += 4;
                    return Boolean.TRUE;
                case 'f':
                    i += 5;
                    return Boolean.FALSE;
                case 'n':
                    i += 4;
                    return null;
                default: {
                    int start = i;
                    while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                        i++;
                    }
                    String num = s.substring(start, i);
                    if (num.isEmpty()) {
                        throw new IllegalArgumentException("unexpected '" + c + "' at " + start);
                    }
                    return num.contains(".") || num.contains("e") || num.contains("E")
                            ? (Object) Double.parseDouble(num) : (Object) Long.parseLong(num);
                }
            }
        }

        private void expect(char c) {
            if (s.charAt(i) != c) {
                throw new IllegalArgumentException("expected '" + c + "' at " + i);
            }
            i++;
        }

        private String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c == '\\') {
                    char e = s.charAt(i++);
                    switch (e) {
                        case 'n' -> b.append('\n');
                        case 't' -> b.append('\t');
                        case 'r' -> b.append('\r');
                        case 'b' -> b.append('\b');
                        case 'f' -> b.append('\f');
                        case 'u' -> {
                            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                            i += 4;
                        }
                        default -> b.append(e);
                    }
                } else {
                    b.append(c);
                }
            }
        }
    }
}
