package podrunner

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/netcode"
)

// expand replaces $(NAME) references in s as the kubelet does for env values, command and args:
// a defined NAME is replaced by its value, an undefined one is kept verbatim, and $$ is an
// escaped $.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// envList is an ordered environment in which a later value of a name replaces the earlier one.
type envList struct {
	names  []string
	values map[string]string
}

func newEnvList() *envList { return &envList{values: map[string]string{}} }

func (e *envList) set(name, value string) {
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

func (e *envList) lookup(name string) (string, bool) {
	v, ok := e.values[name]
	return v, ok
}

// environ returns NAME=value entries in order of first definition.
func (e *envList) environ() []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, n+"="+e.values[n])
	}
	return out
}

// podEnv is what a container's environment is resolved against.
type podEnv struct {
	pod  *corev1.Pod
	addr netip.Addr
	node string
	dir  string
	// reader reads Secrets and ConfigMaps straight from the API server; fetched objects are
	// kept for the rest of one resolution.
	reader     client.Reader
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
}

// launch is a container's resolved process: arguments, environment and the port it serves in
// place of each container port that moved to its host port.
type launch struct {
	args  []string
	env   []string
	moved map[int32]int32
}

// resolve computes the container's process arguments and environment as the kubelet does (see
// the package doc for what differs). An error is a CreateContainerConfigError.
func (p *podEnv) resolve(ctx context.Context, c *corev1.Container) (launch, error) {
	env := newEnvList()
	env.set("PATH", os.Getenv("PATH"))
	env.set("HOME", p.dir)
	env.set("HOSTNAME", p.pod.Name)
	// Only the container's own variables are visible to $(VAR) expansion, as in the kubelet.
	own := newEnvList()
	def := func(name, value string) {
		own.set(name, value)
		env.set(name, value)
	}
	for _, from := range c.EnvFrom {
		if err := p.envFrom(ctx, from, def); err != nil {
			return launch{}, err
		}
	}
	for _, v := range c.Env {
		if v.ValueFrom == nil {
			def(v.Name, expand(v.Value, own.lookup))
			continue
		}
		val, ok, err := p.valueFrom(ctx, v.ValueFrom)
		if err != nil {
			return launch{}, fmt.Errorf("env %s: %w", v.Name, err)
		}
		if ok {
			def(v.Name, val)
		}
	}

	var args []string
	if len(c.Command) > 1 {
		args = append(args, c.Command[1:]...)
	}
	args = append(args, c.Args...)
	for i, a := range args {
		args[i] = expand(a, own.lookup)
	}

	// The deviations of the package doc: bind to the Pod's own address, serve the game port on
	// its host port.
	env.set(netcode.EnvBindAddress, p.addr.String())
	var moved map[int32]int32
	if gp, ok := env.lookup(netcode.EnvGamePort); ok {
		if n, err := strconv.ParseInt(gp, 10, 32); err == nil {
			for _, cp := range c.Ports {
				if cp.ContainerPort == int32(n) && cp.HostPort != 0 && cp.HostPort != cp.ContainerPort {
					env.set(netcode.EnvGamePort, strconv.Itoa(int(cp.HostPort)))
					moved = map[int32]int32{cp.ContainerPort: cp.HostPort}
					break
				}
			}
		}
	}
	return launch{args: args, env: env.environ(), moved: moved}, nil
}

func (p *podEnv) envFrom(ctx context.Context, from corev1.EnvFromSource, def func(name, value string)) error {
	optional := func(o *bool) bool { return o != nil && *o }
	var data map[string]string
	switch {
	case from.ConfigMapRef != nil:
		cm, err := p.configMap(ctx, from.ConfigMapRef.Name)
		if apierrors.IsNotFound(err) && optional(from.ConfigMapRef.Optional) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("envFrom: %w", err)
		}
		data = cm.Data
	case from.SecretRef != nil:
		s, err := p.secret(ctx, from.SecretRef.Name)
		if apierrors.IsNotFound(err) && optional(from.SecretRef.Optional) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("envFrom: %w", err)
		}
		data = make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
	default:
		return fmt.Errorf("envFrom: neither configMapRef nor secretRef")
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	// Sorted, so the environment is the same on every start.
	slices.Sort(keys)
	for _, k := range keys {
		// The kubelet skips keys that are not valid variable names (and records an event).
		if len(validation.IsEnvVarName(from.Prefix+k)) == 0 {
			def(from.Prefix+k, data[k])
		}
	}
	return nil
}

// valueFrom resolves one valueFrom; ok is false for a missing optional reference.
func (p *podEnv) valueFrom(ctx context.Context, src *corev1.EnvVarSource) (val string, ok bool, err error) {
	optional := func(o *bool) bool { return o != nil && *o }
	switch {
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := p.secret(ctx, ref.Name)
		if apierrors.IsNotFound(err) && optional(ref.Optional) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		v, found := s.Data[ref.Key]
		if !found {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, p.pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := p.configMap(ctx, ref.Name)
		if apierrors.IsNotFound(err) && optional(ref.Optional) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		v, found := cm.Data[ref.Key]
		if !found {
			if b, bin := cm.BinaryData[ref.Key]; bin {
				return string(b), true, nil
			}
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, p.pod.Namespace, ref.Name)
		}
		return v, true, nil
	case src.FieldRef != nil:
		v, err := p.field(src.FieldRef.FieldPath)
		return v, err == nil, err
	default:
		// Admission refuses the other sources (see unsupported).
		return "", false, fmt.Errorf("unsupported valueFrom")
	}
}

// field resolves a fieldRef the way the kubelet's downward API does.
func (p *podEnv) field(path string) (string, error) {
	if k, ok := subscript(path, "metadata.labels"); ok {
		return p.pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return p.pod.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return p.pod.Name, nil
	case "metadata.namespace":
		return p.pod.Namespace, nil
	case "metadata.uid":
		return string(p.pod.UID), nil
	case "spec.nodeName":
		return p.node, nil
	case "spec.serviceAccountName":
		return p.pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs":
		return p.addr.String(), nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported", path)
}

// subscript returns k of a path prefix['k'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

func (p *podEnv) secret(ctx context.Context, name string) (*corev1.Secret, error) {
	if s, ok := p.secrets[name]; ok {
		return s, nil
	}
	s := &corev1.Secret{}
	if err := p.reader.Get(ctx, types.NamespacedName{Namespace: p.pod.Namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", p.pod.Namespace, name, err)
	}
	if p.secrets == nil {
		p.secrets = map[string]*corev1.Secret{}
	}
	p.secrets[name] = s
	return s, nil
}

func (p *podEnv) configMap(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	if cm, ok := p.configMaps[name]; ok {
		return cm, nil
	}
	cm := &corev1.ConfigMap{}
	if err := p.reader.Get(ctx, types.NamespacedName{Namespace: p.pod.Namespace, Name: name}, cm); err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", p.pod.Namespace, name, err)
	}
	if p.configMaps == nil {
		p.configMaps = map[string]*corev1.ConfigMap{}
	}
	p.configMaps[name] = cm
	return cm, nil
}
