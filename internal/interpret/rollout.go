package interpret

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// How the members' statuses become the template's, for kinds with a rollout notion
// (Deployment, StatefulSet, DaemonSet, ReplicaSet), so that `kubectl rollout status`, Argo
// CD's health rules and kstatus read the template as the binding's health does:
//
//   - counts (replicas, ready, available...) are the members' sums;
//   - the updated count (updatedReplicas, updatedNumberScheduled) sums only the members that
//     run the template as it is now: a cluster a release still keeps on an older revision, or
//     that runs a canary beside its primary, adds nothing, so the template never reads "all
//     updated" before the last wave is healthy;
//   - observedGeneration becomes the template's generation once every member applied
//     Flotilla's latest render for it and its own controller observed it;
//   - the members' conditions are folded: any member's Progressing=False (reason
//     ProgressDeadlineExceeded) makes the template's Progressing False with that reason and
//     the cluster named; Available is False when any member's is; ReplicaFailure is True when
//     any member's is. Progressing is True with reason NewReplicaSetAvailable only when every
//     member is current and done, ReplicaSetUpdated otherwise.
//
// The release's own verdict (rolled back, aborted) is added by the binding controller, which
// knows the release.

// now is the clock of condition timestamps; tests replace it.
var now = time.Now

// counted sums status counters over members.
type counted struct {
	fields       []string
	updatedField string // counted only for current members; "" if the kind has none
}

func reflectFields(obj *unstructured.Unstructured, fields []string) map[string]any {
	st, _, _ := unstructured.NestedMap(obj.Object, "status")
	out := map[string]any{}
	for _, f := range append(fields, "observedGeneration") {
		if v, ok := st[f]; ok {
			out[f] = v
		}
	}
	// The member's generation tells whether its controller saw the latest spec.
	out["generation"] = obj.GetGeneration()
	return out
}

func (c counted) aggregate(template *unstructured.Unstructured, members []MemberStatus) map[string]any {
	out := map[string]any{}
	sums := map[string]int64{}
	allObserved := len(members) > 0
	for _, m := range members {
		for _, f := range c.fields {
			if f == c.updatedField && !m.Current {
				continue
			}
			sums[f] += toInt64(m.Status[f])
		}
		if !m.Observed || m.Status["generation"] == nil || toInt64(m.Status["observedGeneration"]) < toInt64(m.Status["generation"]) {
			allObserved = false
		}
	}
	for _, f := range c.fields {
		out[f] = sums[f]
	}
	observed := toInt64(getPath(template.Object, "status", "observedGeneration"))
	if allObserved {
		observed = template.GetGeneration()
	}
	out["observedGeneration"] = observed
	return out
}

// memberCondition is one member's condition of one type.
type memberCondition struct {
	cluster string
	cond    map[string]any
}

// aggregateConditions folds the members' Available, Progressing and ReplicaFailure
// conditions; types no member reports are left out. updateTime adds lastUpdateTime, which
// Deployment conditions have and ReplicaSet conditions do not.
func aggregateConditions(template *unstructured.Unstructured, members []MemberStatus, updateTime bool) []any {
	byType := map[string][]memberCondition{}
	sorted := append([]MemberStatus(nil), members...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Cluster < sorted[j].Cluster })
	allCurrent := len(sorted) > 0
	current := 0
	for _, m := range sorted {
		if m.Current {
			current++
		} else {
			allCurrent = false
		}
		conds, _ := m.Status["conditions"].([]any)
		for _, c := range conds {
			if cm, ok := c.(map[string]any); ok {
				t, _ := cm["type"].(string)
				byType[t] = append(byType[t], memberCondition{m.Cluster, cm})
			}
		}
	}
	old := map[string]map[string]any{}
	oldConds, _ := getPath(template.Object, "status", "conditions").([]any)
	for _, c := range oldConds {
		if cm, ok := c.(map[string]any); ok {
			t, _ := cm["type"].(string)
			old[t] = cm
		}
	}
	var out []any
	if mc := byType["Available"]; len(mc) > 0 {
		if bad := withStatus(mc, "False"); len(bad) > 0 {
			out = append(out, condition(old, "Available", "False", reasonOf(bad), joinMessages(bad)))
		} else {
			out = append(out, condition(old, "Available", "True", "MinimumReplicasAvailable",
				fmt.Sprintf("minimum replicas available in every cluster (%d)", len(sorted))))
		}
	}
	if mc := byType["Progressing"]; len(mc) > 0 {
		done := allCurrent && len(withReason(withStatus(mc, "True"), "NewReplicaSetAvailable")) == len(sorted)
		switch bad := withStatus(mc, "False"); {
		case len(bad) > 0:
			if stuck := withReason(bad, "ProgressDeadlineExceeded"); len(stuck) > 0 {
				bad = stuck
			}
			out = append(out, condition(old, "Progressing", "False", reasonOf(bad), joinMessages(bad)))
		case done:
			out = append(out, condition(old, "Progressing", "True", "NewReplicaSetAvailable",
				fmt.Sprintf("every cluster (%d) runs the current revision, available", len(sorted))))
		default:
			out = append(out, condition(old, "Progressing", "True", "ReplicaSetUpdated",
				fmt.Sprintf("%d of %d clusters run the current revision", current, len(sorted))))
		}
	}
	if bad := withStatus(byType["ReplicaFailure"], "True"); len(bad) > 0 {
		out = append(out, condition(old, "ReplicaFailure", "True", reasonOf(bad), joinMessages(bad)))
	}
	if !updateTime {
		for _, c := range out {
			delete(c.(map[string]any), "lastUpdateTime")
		}
	}
	return out
}

func withStatus(mc []memberCondition, status string) []memberCondition {
	var out []memberCondition
	for _, c := range mc {
		if c.cond["status"] == status {
			out = append(out, c)
		}
	}
	return out
}

func withReason(mc []memberCondition, reason string) []memberCondition {
	var out []memberCondition
	for _, c := range mc {
		if c.cond["reason"] == reason {
			out = append(out, c)
		}
	}
	return out
}

func reasonOf(mc []memberCondition) string {
	r, _ := mc[0].cond["reason"].(string)
	return r
}

// joinMessages names each cluster with its message, so the template's condition says where.
func joinMessages(mc []memberCondition) string {
	parts := make([]string, 0, len(mc))
	for _, c := range mc {
		msg, _ := c.cond["message"].(string)
		parts = append(parts, "cluster "+c.cluster+": "+msg)
	}
	msg := strings.Join(parts, "; ")
	if len(msg) > 2048 {
		msg = msg[:2045] + "..."
	}
	return msg
}

// condition builds a Deployment-style condition; its times are kept while its status and
// reason (lastTransitionTime) or also its message (lastUpdateTime) stay the same, so an
// unchanged fleet writes nothing.
func condition(old map[string]map[string]any, condType, status, reason, message string) map[string]any {
	ts := now().UTC().Format(time.RFC3339)
	transition, update := ts, ts
	if o := old[condType]; o != nil && o["status"] == status && o["reason"] == reason {
		if t, ok := o["lastTransitionTime"].(string); ok {
			transition = t
		}
		if t, ok := o["lastUpdateTime"].(string); ok && o["message"] == message {
			update = t
		}
	}
	return map[string]any{"type": condType, "status": status, "reason": reason, "message": message,
		"lastTransitionTime": transition, "lastUpdateTime": update}
}
