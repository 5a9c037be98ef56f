package interpret

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/flotilla-dev/flotilla/internal/luavm"
)

// loadKube builds the `kube` helper library scripts get as a global and through
// require("kube"). Its functions match Karmada's so ported scripts keep working:
//
//	kube.accuratePodRequirements(podTemplate) -> {resourceRequest, nodeClaim, namespace, priorityClassName}
//	kube.getPodDependencies(podTemplate, namespace) -> {{apiVersion, kind, namespace, name}, ...}
func loadKube(L *lua.LState) int {
	mod := L.NewTable()
	mod.RawSetString("accuratePodRequirements", L.NewFunction(accuratePodRequirements))
	mod.RawSetString("getPodDependencies", L.NewFunction(getPodDependencies))
	L.Push(mod)
	return 1
}

// podTemplateArg reads a pod template table (metadata + spec) from the stack.
func podTemplateArg(L *lua.LState, n int) (map[string]any, map[string]any) {
	v, err := luavm.ToGo(L.CheckTable(n))
	if err != nil {
		L.ArgError(n, err.Error())
	}
	tmpl, _ := v.(map[string]any)
	spec, _ := tmpl["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	meta, _ := tmpl["metadata"].(map[string]any)
	return meta, spec
}

func pushGo(L *lua.LState, v any) int {
	lv, err := luavm.ToLua(L, v)
	if err != nil {
		L.RaiseError("kube: %v", err)
	}
	L.Push(lv)
	return 1
}

func accuratePodRequirements(L *lua.LState) int {
	meta, spec := podTemplateArg(L, 1)
	requests, err := podRequests(spec)
	if err != nil {
		L.RaiseError("kube.accuratePodRequirements: %v", err)
	}
	out := map[string]any{}
	if len(requests) > 0 {
		rr := map[string]any{}
		for name, q := range requests {
			rr[string(name)] = q.String()
		}
		out["resourceRequest"] = rr
	}
	claim := map[string]any{}
	if ns, ok := spec["nodeSelector"]; ok {
		claim["nodeSelector"] = ns
	}
	if tol, ok := spec["tolerations"]; ok {
		claim["tolerations"] = tol
	}
	if aff, ok := spec["affinity"].(map[string]any); ok {
		if na, ok := aff["nodeAffinity"].(map[string]any); ok {
			if req, ok := na["requiredDuringSchedulingIgnoredDuringExecution"]; ok {
				claim["hardNodeAffinity"] = req
			}
		}
	}
	if len(claim) > 0 {
		out["nodeClaim"] = claim
	}
	if ns, _ := meta["namespace"].(string); ns != "" {
		out["namespace"] = ns
	}
	if pc, _ := spec["priorityClassName"].(string); pc != "" {
		out["priorityClassName"] = pc
	}
	return pushGo(L, out)
}

func getPodDependencies(L *lua.LState) int {
	_, spec := podTemplateArg(L, 1)
	namespace := L.OptString(2, "")
	deps := podSpecDependencies(spec)
	out := make([]any, 0, len(deps))
	for _, d := range deps {
		out = append(out, map[string]any{"apiVersion": d.APIVersion, "kind": d.Kind, "namespace": namespace, "name": d.Name})
	}
	return pushGo(L, out)
}
