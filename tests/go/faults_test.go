package franzgo

// TestTxnFaults: franz-go's transactional producer (KIP-890 part 2, as the broker finalizes
// transaction.version=2) through faults injected with the control endpoint, against three brokers:
// librdkafka's transaction mock scenarios (pushed request errors, a coordinator moved or taken down,
// a leader change, a slow answer, a zombie fenced). Each subtest uses its own transactional id and
// scopes its faults to it; it checks what the client did (retried and committed, or failed with
// kerr.ProducerFenced), what it sent (the request log: GET /requests?api=EndTxn&transactional_id=...)
// and that read_committed holds the committed records exactly once.
//
// tests/e2e/test_franz_go_faults.py runs it (go test -run TestTxnFaults in tests/go) with
// FAULTS_SEEDS (the three brokers) and FAULTS_CONTROL (the control endpoint); without them it skips.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const tfPartitions = 3

type tfEnv struct {
	seeds   []string
	control string
	topic   string
	suffix  string
}

// tfEntry is one request of the request log.
type tfEntry struct {
	Seq           int64  `json:"seq"`
	Broker        int32  `json:"broker"`
	ClientID      string `json:"client_id"`
	APIVersion    int    `json:"api_version"`
	Error         string `json:"error"`
	Fault         string `json:"fault"`
	Answered      string `json:"answered"`
	ProducerID    *int64 `json:"producer_id"`
	ProducerEpoch *int   `json:"producer_epoch"`
}

func (e tfEntry) String() string {
	epoch := "-"
	if e.ProducerEpoch != nil {
		epoch = fmt.Sprint(*e.ProducerEpoch)
	}
	s := fmt.Sprintf("{broker %d v%d epoch %s %s", e.Broker, e.APIVersion, epoch, e.Error)
	if e.Fault != "" {
		s += " fault " + e.Fault
	}
	return s + " " + e.Answered + "}"
}

func (e tfEntry) epoch(t *testing.T) int {
	t.Helper()
	if e.ProducerEpoch == nil {
		t.Fatalf("request log entry without a producer epoch: %v", e)
	}
	return *e.ProducerEpoch
}

func tfErrors(entries []tfEntry) []string {
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Error)
	}
	return out
}

func tfByClient(entries []tfEntry, clientID string) []tfEntry {
	var out []tfEntry
	for _, e := range entries {
		if e.ClientID == clientID {
			out = append(out, e)
		}
	}
	return out
}

// call: one control endpoint request; the JSON answer decoded into out (if not nil).
func (env *tfEnv) call(t *testing.T, method, path string, body any, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, env.control+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s %v: %s %s", method, path, body, resp.Status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
}

// push: rd_kafka_mock_push_request_errors scoped to a transactional id (and a broker if >= 0).
func (env *tfEnv) push(t *testing.T, api, txnID string, broker int32, errs ...any) {
	t.Helper()
	rule := map[string]any{"api": api, "transactional_id": txnID, "errors": errs}
	if broker >= 0 {
		rule["broker"] = broker
	}
	env.call(t, "POST", "/faults", rule, nil)
}

func (env *tfEnv) requests(t *testing.T, api, txnID string) []tfEntry {
	t.Helper()
	var out struct {
		Requests []tfEntry `json:"requests"`
	}
	env.call(t, "GET", "/requests?api="+url.QueryEscape(api)+"&transactional_id="+url.QueryEscape(txnID)+"&limit=10000",
		nil, &out)
	return out.Requests
}

type tfPartition struct {
	Leader int32   `json:"leader"`
	ISR    []int32 `json:"isr"`
}

func (env *tfEnv) partition(t *testing.T, topic string, p int) tfPartition {
	t.Helper()
	var out struct {
		Partitions []tfPartition `json:"partitions"`
	}
	env.call(t, "GET", "/topics/"+url.PathEscape(topic), nil, &out)
	return out.Partitions[p]
}

// coordinator: the transactional id's __transaction_state partition: its leader and ISR.
func (env *tfEnv) coordinator(t *testing.T, txnID string) (int32, []int32) {
	t.Helper()
	var c struct {
		Topic     string `json:"topic"`
		Partition int    `json:"partition"`
	}
	env.call(t, "GET", "/coordinators/transaction/"+url.PathEscape(txnID), nil, &c)
	p := env.partition(t, c.Topic, c.Partition)
	return p.Leader, p.ISR
}

func tfOther(t *testing.T, candidates []int32, not int32) int32 {
	t.Helper()
	for _, b := range candidates {
		if b != not {
			return b
		}
	}
	t.Fatalf("no broker other than %d in %v", not, candidates)
	return -1
}

func (env *tfEnv) waitFullISR(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for p := 0; p < tfPartitions; p++ {
		for len(env.partition(t, env.topic, p).ISR) != 3 {
			if time.Now().After(deadline) {
				t.Fatalf("the ISR of %s-%d never reached 3: %v", env.topic, p, env.partition(t, env.topic, p))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (env *tfEnv) id(what string) string { return "txn-faults-go-" + what + "-" + env.suffix }

func (env *tfEnv) producer(t *testing.T, clientID, txnID string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(env.seeds...), kgo.ClientID(clientID), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(20 * time.Second), kgo.DefaultProduceTopic(env.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// expected: the values a subtest committed, per partition in order.
type tfExpected map[int32][]string

// produce: n records <name>:<tag>-<i> round-robin over the partitions (or all to one partition, if
// only >= 0), acknowledged; added to committed unless it is nil.
func (env *tfEnv) produce(t *testing.T, ctx context.Context, cl *kgo.Client, name, tag string, n int, only int32,
	committed tfExpected) {
	t.Helper()
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		p := int32(i % tfPartitions)
		if only >= 0 {
			p = only
		}
		v := fmt.Sprintf("%s:%s-%d", name, tag, i)
		recs = append(recs, &kgo.Record{Partition: p, Value: []byte(v)})
		if committed != nil {
			committed[p] = append(committed[p], v)
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %s:%s: %v", name, tag, err)
	}
}

func commit(t *testing.T, ctx context.Context, cl *kgo.Client) {
	t.Helper()
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func begin(t *testing.T, cl *kgo.Client) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
}

// read: every record of the topic up to an end marker written now to each partition (after this
// subtest's transactions completed, so read_committed reaches it only once they are all decided).
func (env *tfEnv) read(t *testing.T, ctx context.Context, name string, level kgo.IsolationLevel) map[int32][]string {
	t.Helper()
	marker, err := kgo.NewClient(kgo.SeedBrokers(env.seeds...), kgo.DefaultProduceTopic(env.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	end := "END:" + name + fmt.Sprint(time.Now().UnixNano())
	var recs []*kgo.Record
	for p := int32(0); p < tfPartitions; p++ {
		recs = append(recs, &kgo.Record{Partition: p, Value: []byte(end)})
	}
	err = marker.ProduceSync(ctx, recs...).FirstErr()
	marker.Close()
	if err != nil {
		t.Fatalf("end markers: %v", err)
	}
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < tfPartitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.seeds...), kgo.FetchIsolationLevel(level),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{env.topic: offsets}), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int32][]string{}
	ended := map[int32]bool{}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(ended) < tfPartitions {
		fetches := cons.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read %s: only partitions %v reached the end marker", env.topic, ended)
		}
		if err := fetches.Err(); err != nil {
			t.Fatalf("read: %v", err)
		}
		for _, r := range fetches.Records() {
			v := string(r.Value)
			switch {
			case v == end:
				ended[r.Partition] = true
			case strings.HasPrefix(v, name+":"):
				got[r.Partition] = append(got[r.Partition], v)
			}
		}
	}
	return got
}

// checkOnce: read_committed holds exactly the committed records (each once, in order per partition),
// and read_uncommitted holds none of them twice.
func (env *tfEnv) checkOnce(t *testing.T, ctx context.Context, name string, committed tfExpected) {
	t.Helper()
	got := env.read(t, ctx, name, kgo.ReadCommitted())
	want := map[int32][]string(committed)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read_committed: got %v, want %v", got, want)
	}
	for p, vs := range env.read(t, ctx, name, kgo.ReadUncommitted()) {
		seen := map[string]bool{}
		for _, v := range vs {
			if seen[v] {
				t.Fatalf("partition %d holds %s twice: %v", p, v, vs)
			}
			seen[v] = true
		}
	}
}

func TestTxnFaults(t *testing.T) {
	seeds, control := os.Getenv("FAULTS_SEEDS"), os.Getenv("FAULTS_CONTROL")
	if seeds == "" || control == "" {
		t.Skip("FAULTS_SEEDS and FAULTS_CONTROL not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Second)
	defer cancel()
	env := &tfEnv{seeds: strings.Split(seeds, ","), control: strings.TrimRight(control, "/"),
		suffix: fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff)}
	env.topic = env.id("data")
	admin, err := kgo.NewClient(kgo.SeedBrokers(env.seeds...))
	if err != nil {
		t.Fatal(err)
	}
	if err := createTopic(ctx, admin, env.topic, tfPartitions, 3, nil); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	admin.Close()
	env.waitFullISR(t)

	subs := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, env *tfEnv, name string)
	}{
		{"tv2-versions", tfTV2Versions},
		{"find-coordinator-errors", tfFindCoordinatorErrors},
		{"init-producer-id-errors", tfInitProducerIDErrors},
		{"endtxn-not-coordinator-moved", tfEndTxnCoordinatorMoved},
		{"produce-leader-change", tfProduceLeaderChange},
		{"endtxn-timeout-retry", tfEndTxnTimeoutRetry},
		{"zombie-fenced", tfZombieFenced},
		{"zombie-send-fenced", tfZombieSendFenced},
		{"coordinator-down", tfCoordinatorDown},
		{"coordinator-down-during-commit", tfCoordinatorDownDuringCommit},
	}
	only := map[string]bool{}
	for _, s := range strings.Split(os.Getenv("TXN_FAULTS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			only[s] = true
		}
	}
	for _, s := range subs {
		if len(only) > 0 && !only[s.name] {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			defer env.call(t, "DELETE", "/faults", nil, nil)
			s.fn(t, ctx, env, s.name)
		})
	}
}

// tfTV2Versions: the wire under KIP-890 part 2: Produce v12+ and no AddPartitionsToTxn, EndTxn v5 whose
// answer bumps the epoch (the next transaction runs at epoch + 1); an EndTxn answered
// CONCURRENT_TRANSACTIONS is retried at the same epoch.
func tfTV2Versions(t *testing.T, ctx context.Context, env *tfEnv, name string) {
	txnID, clientID := env.id(name), env.id(name+"-p")
	committed := tfExpected{}
	cl := env.producer(t, clientID, txnID)
	defer cl.Close()
	begin(t, cl)
	env.produce(t, ctx, cl, name, "t1", 6, -1, committed)
	commit(t, ctx, cl)
	env.push(t, "EndTxn", txnID, -1, "CONCURRENT_TRANSACTIONS")
	begin(t, cl)
	env.produce(t, ctx, cl, name, "t2", 6, -1, committed)
	commit(t, ctx, cl)

	end := env.requests(t, "EndTxn", txnID)
	if got := tfErrors(end); !reflect.DeepEqual(got, []string{"NONE", "CONCURRENT_TRANSACTIONS", "NONE"}) {
		t.Fatalf("EndTxn answers %v: %v", got, end)
	}
	for _, e := range end {
		if e.APIVersion != 5 {
			t.Fatalf("EndTxn v%d under TV2: %v", e.APIVersion, end)
		}
	}
	e1 := end[0].epoch(t)
	if end[1].epoch(t) != e1+1 || end[2].epoch(t) != e1+1 {
		t.Fatalf("EndTxn epochs: want %d, then %d twice (bumped by the v5 answer, then the retry): %v", e1, e1+1, end)
	}
	produce := tfByClient(env.requests(t, "Produce", txnID), clientID)
	if len(produce) == 0 {
		t.Fatalf("no Produce logged for %s", txnID)
	}
	versions := map[int]bool{}
	for _, e := range produce {
		versions[e.APIVersion] = true
		if e.APIVersion < 12 || e.Error != "NONE" || (e.epoch(t) != e1 && e.epoch(t) != e1+1) {
			t.Fatalf("Produce under TV2 (want v12+, NONE, epoch %d or %d): %v", e1, e1+1, e)
		}
	}
	if apt := tfByClient(env.requests(t, "AddPartitionsToTxn", txnID), clientID); len(apt) > 0 {
		t.Fatalf("the TV2 producer sent AddPartitionsToTxn: %v", apt)
	}
	t.Logf("EndTxn %v; Produce versions %v", end, versions)
	env.checkOnce(t, ctx, name, committed)
}

// tfFindCoordinatorErrors: FindCoordinator answered COORDINATOR_NOT_AVAILABLE, then NOT_COORDINATOR:
// retried; the producer id is initialized and the transaction commits.
func tfFindCoordinatorErrors(t *testing.T, ctx context.Context, env *tfEnv, name string) {
	txnID := env.id(name)
	env.push(t, "FindCoordinator", txnID, -1, "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR")
	committed := tfExpected{}
	cl := env.producer(t, env.id(name+"-p"), txnID)
	defer cl.Close()
	begin(t, cl)
	env.produce(t, ctx, cl, name, "t1", 3, -1, committed)
	commit(t, ctx, cl)
	fc := env.requests(t, "FindCoordinator", txnID)
	if len(fc) < 3 || !reflect.DeepEqual(tfErrors(fc[:3]), []string{"COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "NONE"}) {
		t.Fatalf("FindCoordinator answers: %v", fc)
	}
	if got := tfErrors(env.requests(t, "InitProducerId", txnID)); !reflect.DeepEqual(got, []string{"NONE"}) {
		t.Fatalf("InitProducerId answers: %v", got)
	}
	if got := tfErrors(env.requests(t, "EndTxn", txnID)); !reflect.DeepEqual(got, []string{"NONE"}) {
		t.Fatalf("EndTxn answers: %v", got)
	}
	env.checkOnce(t, ctx, name, committed)
}

// tfInitProducerIDErrors: InitProducerId answered COORDINATOR_LOAD_IN_PROGRESS, then
// CONCURRENT_TRANSACTIONS: retried, the transaction commits.
func tfInitProducerIDErrors(t *testing.T, ctx context.Context, env *tfEnv, name string) {
	txnID := env.id(name)
	env.push(t, "InitProducerId", txnID, -1, "COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS")
	committed := tfExpected{}
	cl := env.producer(t, env.id(name+"-p"), txnID)
	defer cl.Close()
	begin(t, cl)
	env.produce(t, ctx, cl, name, "t1", 3, -1, committed)
	commit(t, ctx, cl)
	init := env.requests(t, "InitProducerId", txnID)
	if got := tfErrors(init); !reflect.DeepEqual(got, []string{"COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS", "NONE"}) {
		t.Fatalf("InitProducerId answers: %v", init)
	}
	if got := tfErrors(env.requests(t, "EndTxn", txnID)); !reflect.DeepEqual(got, []string{"NONE"}) {
		t.Fatalf("EndTxn answers: %v", got)
	}
	env.checkOnce(t, ctx, name, committed)
}

// tfEndTxnCoordinatorMoved: the commit's EndTxn answered NOT_COORDINATOR and the coordinator moved to
// another broker: the client finds the new coordinator (which loaded the open transaction) and the
// commit completes there, at the same epoch; the next transaction commits there too.
func tfEndTxnCoordinatorMoved(t *testing.T, ctx context.Context, env *tfEnv, name string) {
	txnID := env.id(name)
	committed := tfExpected{}
	cl := env.producer(t, env.id(name+"-p"), txnID)
	defer cl.Close()
	begin(t, cl)
	env.produce(t, ctx, cl, name, "t1", 6, -1, committed)
	from, isr := env.coordinator(t, txnID)
	to := tfOther(t, isr, from)
	env.push(t, "EndTxn", txnID, from, "NOT_COORDINATOR")
	env.call(t, "POST", "/coordinators/transaction/"+url.PathEscape(txnID), map[string]any{"broker": to}, nil)
	if now, _ := env.coordinator(t, txnID); now != to {
		t.Fatalf("the coordinator is %d after moving it to %d", now, to)
	}
	commit(t, ctx, cl)
	begin(t, cl)
	env.produce(t, ctx, cl, name, "t2", 3, -1, committed)
	commit(t, ctx, cl)

	end := env.requests(t, "EndTxn", txnID)
	t.Logf("coordinator %d -> %d; EndTxn %v", from, to, end)
	if len(end) < 3 || end[0].Error != "NOT_COORDINATOR" || end[0].Broker != from {
		t.Fatalf("the first EndTxn: want NOT_COORDINATOR from broker %d: %v", from, end)
	}
	c := end[len(end)-2]
	if c.Error != "NONE" || c.Broker != to || c.epoch(t) != end[0].epoch(t) {
		t.Fatalf("the commit: want NONE from broker %d at epoch %d: %v", to, end[0].epoch(t), end)
	}
	if last := end[len(end)-1]; last.Error != "NONE" || last.Broker != to {
		t.Fatalf("the second transaction's EndTxn: %v", end)
	}
	found := false
	for _, e := range env.requests(t, "FindCoordinator", txnID) {
		found = found || e.Seq > end[0].Seq
	}
	if !found {
		t.Fatalf("no FindCoordinator after the NOT_COORDINATOR answer")
	}
	env.checkOnce(t, ctx, name, committed)
}

// tfProduceLeaderChange: a Produce answered NOT_LEADER_OR_FOLLOWER while the partition's leader moves,
// mid-transaction: the batch goes to the new leader and every record is written once.
func tfProduceLeaderChange(t *testing.T, ctx context.Context, env *tfEnv, name string) {
	txnID := env.id(name)
	committed := tfExpected{}
	cl := env.producer(t, env.id(name+"-p"), txnID)
	defer cl.Close()
	begin(t, cl)
	env.produce(t, ctx, cl, name, "a", 5, 0, committed)
	p0 := env.partition(t, env.topic, 0)
	from, to := p0.Leader, tfOther(t, p0.ISR, p0.Leader)
	env.call(t, "POST", "/faults", map[string]any{"api": "Produce", "topic": env.topic, "partition": 0,
		"transactional_id": txnID, "broker": from, "errors": []string{"NOT_LEADER_OR_FOLLOWER"}}, nil)
	env.call(t, "POST", fmt.Sprintf("/topics/%s/partitions/0/leader", url.PathEscape(env.topic)),
		map[string]any{"broker": to}, nil)
	env.produce(t, ctx, cl, name, "b", 5, 0, committed)
	commit(t, ctx, cl)

	produce := env.requests(t, "Produce", txnID)
	t.Logf("leader %d -> %d; Produce %v", from, to, produce)
	at := -1
	for i, e := range produce {
		if e.Error == "NOT_LEADER_OR_FOLLOWER" {
			at = i
			break
		}
	}
	if at < 0 || produce[at].Broker != from || at == len(produce)-1 {
		t.Fatalf("want a Produce refused NOT_LEADER_OR_FOLLOWER by broker %d, then others: %v", from, produce)
	}
	for _, e := range produce[at+1:] {
		if e.Broker != to || e.Error != "NONE" {
			t.Fatalf("the Produce after the leader change: want NONE from broker %d: %v", to, produce)
		}
	}
	if got := tfErrors(env.requests(t, "EndTxn", txnID)); !reflect.DeepEqual(got, []string{"NONE"}) {
		t.Fatalf("EndTxn answers: %v", got)
	}
	env.checkOnce(t, ctx, name, committed)
}

// tfEndTxnTimeoutRetry: the coordinator answers the commit's EndTxn after longer than the client's
// request timeout (the commit was carried out, its answer held): the client retries it at the same
// epoch, the coordinator answers the retry as the completed commit with the bumped epoch, and the next
// transaction commits at that epoch. Committed once.
func tfEndTxnTimeoutRetry(t *testing.T, ctx context.Context, env *tfEnv, name string) {
	txnID := env.id(name)
	committed := tfExpected{}
	cl := env.producer(t, env.id(name+"-p"), txnID, kgo.RequestTimeoutOverhead(2*time.Second))
	defer cl.Close()
	begin(t, cl)
	env.produce(t, ctx, cl, name, "t1", 6, -1, committed)
	env.push(t, "EndTxn", txnID, -1, map[string]any{"error": "NONE", "delay_ms": 4000})
	t0 := time.Now()
	commit(t, ctx, cl)
	took := time.Since(t0)
	begin(t, cl)
	env.produce(t, ctx, cl, name, "t2", 3, -1, committed)
	commit(t, ctx, cl)

	end := env.requests(t, "EndTxn", txnID)
	t.Logf("commit took %v; EndTxn %v", took, end)
	if took < 1500*time.Millisecond {
		t.Fatalf("the commit took %v: the slow answer was not waited for", took)
	}
	if len(end) < 3 || !strings.HasPrefix(end[0].Fault, "delay") {
		t.Fatalf("want the slow EndTxn, its retry and the next transaction's: %v", end)
	}
	e1 := end[0].epoch(t)
	retries := end[1 : len(end)-1]
	for _, r := range retries {
		if r.epoch(t) != e1 {
			t.Fatalf("the retried EndTxn at epoch %d, want %d: %v", r.epoch(t), e1, end)
		}
	}
	if retries[len(retries)-1].Error != "NONE" {
		t.Fatalf("the retried EndTxn's answer: %v", end)
	}
	if next := end[len(end)-1]; next.Error != "NONE" || next.epoch(t) != e1+1 {
		t.Fatalf("the next transaction's EndTxn: want NONE at epoch %d: %v", e1+1, end)
	}
	env.checkOnce(t, ctx, name, committed)
}

// tfZombieFenced: a second producer with the same transactional id initializes while the first has
// an open transaction: the first's commit fails with PRODUCER_FENCED (its records aborted) and it
// cannot begin another; the new producer commits.
func tfZombieFenced(t *testing.T, ctx context.Context, env *tfEnv, name string) {
	txnID := env.id(name)
	zombieID, newID := env.id(name+"-zombie"), env.id(name+"-new")
	committed := tfExpected{}
	zombie := env.producer(t, zombieID, txnID)
	defer zombie.Close()
	begin(t, zombie)
	env.produce(t, ctx, zombie, name, "zombie", 6, -1, nil)
	if err := zombie.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := env.producer(t, newID, txnID)
	defer fresh.Close()
	begin(t, fresh) // initializes the producer id: the coordinator aborts the zombie's transaction
	if init := tfByClient(env.requests(t, "InitProducerId", txnID), newID); len(init) == 0 ||
		init[len(init)-1].Error != "NONE" {
		t.Fatalf("the new producer's InitProducerId: %v", init)
	}
	err := zombie.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("the zombie's commit: %v, want PRODUCER_FENCED", err)
	}
	// what franz-go documents after a failed commit: abort; then the fenced producer cannot begin again
	abortErr := zombie.EndTransaction(ctx, kgo.TryAbort)
	if err := zombie.BeginTransaction(); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("the zombie's next transaction (after the abort: %v): %v, want PRODUCER_FENCED", abortErr, err)
	}
	env.produce(t, ctx, fresh, name, "new", 3, -1, committed)
	commit(t, ctx, fresh)

	end := env.requests(t, "EndTxn", txnID)
	t.Logf("zombie: %v; abort: %v; EndTxn %v", err, abortErr, end)
	tfExpectAnswers(t, end, map[string][]string{zombieID: {"PRODUCER_FENCED"}, newID: {"NONE"}})
	env.checkOnce(t, ctx, name, committed)
}

// tfCoordinatorDown: the transaction coordinator's broker goes down mid-transaction; its
// __transaction_state partition and the data partitions it led fail over; the producer produces on
// and commits through the new coordinator; the broker comes back and the next transaction commits too.
func tfCoordinatorDown(t *testing.T, ctx context.Context, env *tfEnv, name string) {
	txnID := env.id(name)
	committed := tfExpected{}
	cl := env.producer(t, env.id(name+"-p"), txnID)
	defer cl.Close()
	begin(t, cl)
	env.produce(t, ctx, cl, name, "a", 6, -1, committed)
	down, _ := env.coordinator(t, txnID)
	env.whileDown(t, down, func() {
		env.produce(t, ctx, cl, name, "b", 6, -1, committed)
		commit(t, ctx, cl)
		if now, _ := env.coordinator(t, txnID); now == down {
			t.Fatalf("the coordinator is still the downed broker %d", down)
		}
	})
	env.waitFullISR(t)
	begin(t, cl)
	env.produce(t, ctx, cl, name, "c", 3, -1, committed)
	commit(t, ctx, cl)

	end := env.requests(t, "EndTxn", txnID)
	t.Logf("coordinator %d down; EndTxn %v", down, end)
	var ok []tfEntry
	for _, e := range end {
		if e.Error == "NONE" {
			ok = append(ok, e)
		}
	}
	if len(ok) != 2 || ok[0].Broker == down {
		t.Fatalf("want two EndTxn answered NONE, the first not by the downed broker %d: %v", down, end)
	}
	env.checkOnce(t, ctx, name, committed)
}

// tfExpectAnswers: each client's answers among these entries, in order, are the errors wanted.
func tfExpectAnswers(t *testing.T, entries []tfEntry, want map[string][]string) {
	t.Helper()
	for client, errs := range want {
		if got := tfErrors(tfByClient(entries, client)); !reflect.DeepEqual(got, errs) {
			t.Fatalf("%s's answers: %v, want %v (all: %v)", client, got, errs, entries)
		}
	}
}

// whileDown runs fn with this broker down and brings it back up however fn ends.
func (env *tfEnv) whileDown(t *testing.T, broker int32, fn func()) {
	env.call(t, "POST", fmt.Sprintf("/brokers/%d/down", broker), map[string]any{}, nil)
	defer env.call(t, "POST", fmt.Sprintf("/brokers/%d/up", broker), map[string]any{}, nil)
	fn()
}

// tfLastSeq: the seq of the newest of these request log entries (0: none).
func tfLastSeq(entries []tfEntry) int64 {
	var last int64
	for _, e := range entries {
		last = max(last, e.Seq)
	}
	return last
}

func tfFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// tfZombieSendFenced: after the new producer initialized, the zombie's next record (to a partition its
// transaction had not written) is refused: the leader verifies it with the coordinator (KIP-890) and
// answers INVALID_PRODUCER_EPOCH, as Kafka maps PRODUCER_FENCED for produce; the zombie's abort fails
// with PRODUCER_FENCED (its EndTxn's answer). Nothing of the zombie is visible.
func tfZombieSendFenced(t *testing.T, ctx context.Context, env *tfEnv, name string) {
	txnID := env.id(name)
	zombieID, newID := env.id(name+"-zombie"), env.id(name+"-new")
	committed := tfExpected{}
	zombie := env.producer(t, zombieID, txnID, kgo.RecordRetries(3))
	defer zombie.Close()
	begin(t, zombie)
	env.produce(t, ctx, zombie, name, "zombie", 3, 0, nil)
	fresh := env.producer(t, newID, txnID)
	defer fresh.Close()
	begin(t, fresh)
	since := tfLastSeq(env.requests(t, "Produce", txnID))
	lateErr := zombie.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte(name + ":zombie-late")}).FirstErr()
	if !tfFenced(lateErr) {
		t.Fatalf("the zombie's late record: %v, want INVALID_PRODUCER_EPOCH or PRODUCER_FENCED", lateErr)
	}
	var late []tfEntry
	for _, e := range tfByClient(env.requests(t, "Produce", txnID), zombieID) {
		if e.Seq > since {
			late = append(late, e)
		}
	}
	if len(late) == 0 || late[0].Error != "INVALID_PRODUCER_EPOCH" {
		t.Fatalf("the zombie's late Produce: want INVALID_PRODUCER_EPOCH (KIP-890 verification of a fenced epoch): %v", late)
	}
	abortErr := zombie.EndTransaction(ctx, kgo.TryAbort)
	if !errors.Is(abortErr, kerr.ProducerFenced) {
		t.Fatalf("the zombie's abort: %v, want PRODUCER_FENCED", abortErr)
	}
	env.produce(t, ctx, fresh, name, "new", 3, -1, committed)
	commit(t, ctx, fresh)

	end := env.requests(t, "EndTxn", txnID)
	t.Logf("late record: %v; abort: %v; EndTxn %v", lateErr, abortErr, end)
	tfExpectAnswers(t, end, map[string][]string{zombieID: {"PRODUCER_FENCED"}, newID: {"NONE"}})
	env.checkOnce(t, ctx, name, committed)
}

// tfCoordinatorDownDuringCommit: the coordinator's broker goes down while the commit's EndTxn answer
// is on its way (the commit was carried out, its answer held): the client loses the connection,
// finds the new coordinator, which loaded the transaction and answers the retried EndTxn (same epoch)
// as the commit it completed; the producer goes on at the bumped epoch. Committed once.
func tfCoordinatorDownDuringCommit(t *testing.T, ctx context.Context, env *tfEnv, name string) {
	txnID := env.id(name)
	committed := tfExpected{}
	cl := env.producer(t, env.id(name+"-p"), txnID)
	defer cl.Close()
	begin(t, cl)
	env.produce(t, ctx, cl, name, "t1", 6, -1, committed)
	down, _ := env.coordinator(t, txnID)
	env.push(t, "EndTxn", txnID, down, map[string]any{"error": "NONE", "delay_ms": 5000})
	done := make(chan error, 1)
	go func() { done <- cl.EndTransaction(ctx, kgo.TryCommit) }()
	for deadline := time.Now().Add(30 * time.Second); len(env.requests(t, "EndTxn", txnID)) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the EndTxn never reached the coordinator")
		}
		time.Sleep(20 * time.Millisecond)
	}
	env.whileDown(t, down, func() {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("commit: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the commit did not complete")
		}
		if now, _ := env.coordinator(t, txnID); now == down {
			t.Fatalf("the coordinator is still the downed broker %d", down)
		}
	})
	env.waitFullISR(t)
	begin(t, cl)
	env.produce(t, ctx, cl, name, "t2", 3, -1, committed)
	commit(t, ctx, cl)

	end := env.requests(t, "EndTxn", txnID)
	t.Logf("coordinator %d down during the commit; EndTxn %v", down, end)
	if len(end) < 3 || end[0].Broker != down {
		t.Fatalf("want the held EndTxn on broker %d, its retry and the next transaction's: %v", down, end)
	}
	e1 := end[0].epoch(t)
	if r := end[len(end)-2]; r.Error != "NONE" || r.Broker == down || r.epoch(t) != e1 {
		t.Fatalf("the retried commit: want NONE at epoch %d from another broker: %v", e1, end)
	}
	if next := end[len(end)-1]; next.Error != "NONE" || next.epoch(t) != e1+1 {
		t.Fatalf("the next transaction's EndTxn: want NONE at epoch %d: %v", e1+1, end)
	}
	env.checkOnce(t, ctx, name, committed)
}
