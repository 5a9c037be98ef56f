package cli

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// tableSerializer lets a REST client exist for raw Table requests; responses are decoded by hand.
func tableSerializer() runtime.NegotiatedSerializer {
	return serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
}
