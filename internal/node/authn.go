package node

import (
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// certAuthn is the API server's client authentication (an envtest.Authn): certificates signed by
// the node's CA, so that the kubelet, kube-proxy, the scheduler and the controller manager each
// authenticate as their own Kubernetes user, with the groups the Node authorizer and the
// bootstrap RBAC roles expect.
type certAuthn struct {
	ca     *authority
	caFile string
}

var _ envtest.Authn = (*certAuthn)(nil)

func (c *certAuthn) Configure(_ string, args *envtest.Arguments) error {
	args.Set("client-ca-file", c.caFile)
	return nil
}

func (c *certAuthn) Start() error { return nil }

func (c *certAuthn) AddUser(user envtest.User, base *rest.Config) (*rest.Config, error) {
	kp, err := c.ca.client(user.Name, user.Groups)
	if err != nil {
		return nil, fmt.Errorf("client certificate for %s: %w", user.Name, err)
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = kp.certPEM, kp.keyPEM
	return cfg, nil
}

func (c *certAuthn) Stop() error { return nil }
