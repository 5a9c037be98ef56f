// Package analysis is the measurement engine of AnalysisRuns: it builds a run from templates
// (NewRun), takes each metric's measurements through a provider (Prometheus, a web endpoint,
// or Jobs in the member clusters), judges every measurement with the metric's conditions, and
// turns the counters into a verdict per metric and per run. The AnalysisRun controller
// (package analysisrun) drives it; the release controller builds runs with it.
//
// Through the controller it owns an AnalysisRun's status and, for job metrics, the analysis
// Jobs it creates in members (labelled with the run's name). It never writes AnalysisTemplates,
// bindings, releases or member workloads, and never writes an AnalysisRun's spec or metadata:
// whoever creates a run reads its phase. It must not import any controller.
//
// Conditions are expr-lang expressions over `result`:
//
//   - prometheus: an instant vector is a []float64 of the sample values in the order the
//     server returned them (`result[0] >= 0.90`); a scalar is a float64. Other result types are
//     an error.
//   - web: the JSON value jsonPath picks ({$.data.ok}), decoded as encoding/json does (numbers
//     are float64). A JSON string stays a string even when it reads like a number or a bool:
//     write `float(result) > 0.9` or `result == "true"`; the value is never guessed.
//   - job: true when every Job completed, false when any failed. A job metric without
//     conditions succeeds exactly when every Job completes.
//
// One measurement is judged as follows: failureCondition true is Failed; successCondition true
// is Successful; successCondition false is Inconclusive when a failureCondition is set, Failed
// otherwise; no condition at all is Successful. A provider error, or a condition that cannot be
// evaluated (an index past the end of an empty vector), is an Error measurement: never a
// success.
//
// A metric is Failed when its failed measurements exceed failureLimit, Inconclusive when its
// inconclusive ones exceed inconclusiveLimit, Error when more than consecutiveErrorLimit
// (default 4) errors came in a row, and Successful once count measurements with a verdict were
// taken (one when neither count nor interval is set). Error measurements are retried and do not
// count toward count, so an unreachable server can only end in Error. A run is Failed when any
// metric failed, else Error, else Inconclusive, else Successful once every metric is; when its
// spec says terminate, metrics still measuring count as Successful.
//
// A dry-run metric (spec.dryRun, "*" for all) is measured and judged like any other, and its
// result says dryRun, but its verdict never decides the run: the run waits for it to finish and
// its message lists the dry-run metrics that did not succeed. A metric's result keeps its
// latest 10 measurements, or its measurementRetention (at most 50). An interval of zero needs a
// count: back to back without end is refused (at admission, and here as an Error run for a run
// written before that rule).
//
// Conditions are bounded per evaluation, because users write them and the controller is
// shared: at most 300 syntax nodes (compile time); at most 100,000 elements in all ranges,
// arrays, maps and loop scopes together (expr's VM memory budget, which also bounds the
// iterations of all loops); and at most 4 MiB of text and copied collections built, charged
// before they are built. The last bound exists because expr charges what its functions built
// only after building it (repeat("<990 bytes>", 1000000) allocated almost 1 GiB): `+` and every
// builtin whose output grows with its input (repeat, replace, join, toJSON, string, upper,
// lower, split, fromJSON, base64, keys, values, pairs, take, uniq, median) are rewritten at
// compile time to wrappers that compute the size first (see bounds.go). What is not bounded is
// wall-clock time: expr's VM cannot be interrupted, so a loop of up to 100,000 iterations that
// scans a large result (a 1 MiB web answer) with `matches` costs CPU, though no memory.
//
// A namespace's AnalysisTemplate is tenant input; a ClusterAnalysisTemplate is the platform's.
// A run's spec.templates says which metric came from which (NewRunFrom writes it); a metric it
// does not name is a tenant's. Web and Prometheus calls (egress.go) use http or https only
// (refused at admission where the URL is written out, and before calling), follow at most 3
// redirects and only to the same host, read at most 1 MiB, and dial only addresses Egress
// permits, checked at connect time so DNS cannot steer around it: a tenant's metric reaches
// public addresses, a platform's also private and loopback ones, and link-local, metadata,
// unspecified and multicast addresses are reached only through --analysis-allow-cidr. No error
// repeats an answer's body; what is recorded is the value jsonPath picked (cut to 1 KiB). The
// trade-off: a tenant who needs an in-cluster endpoint asks the platform for a
// ClusterAnalysisTemplate or an allowed range, instead of every tenant reaching every internal
// service with Flotilla's network position.
//
// A tenant's job metric is checked against the Pod Security level (--analysis-pod-security-level,
// restricted by default) with the Kubernetes pod-security-admission library before any Job is
// created; a member namespace Flotilla creates for the Jobs is labelled to enforce the level,
// an existing one is never relabelled. The platform's Jobs are not checked.
//
// {{args.NAME}} in a Prometheus query, a web url, body or header, and the Job spec is replaced
// by the run's argument; a missing value is an error naming the argument. Values are inserted
// as written (no URL or PromQL escaping). A template may use only the args it declares
// (TemplateProblems); valueFrom args are resolved by the run's creator before NewRun.
package analysis
