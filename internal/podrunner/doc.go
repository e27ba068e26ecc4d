// Package podrunner is the kubelet (and the scheduler) of netfleet's local control plane: with no
// container runtime on the machine, it runs each Pod it is responsible for as local processes on a
// loopback address of its own and reports the Pod's status to the API server as a kubelet would.
//
// A Runner is responsible for a Pod when every container image of the Pod is in its image map
// (an image or an image repository, matching any tag or digest, mapped to a local binary) and
// the Pod is unscheduled (scheduler name default-scheduler) or bound to one of the runner's
// nodes. Every other Pod is left alone. For each Pod it:
//
//   - takes a free loopback address 127.0.0.N (N from 2 upward; reused once the Pod is gone),
//     ensures a Node for that address (named e.g. netfleet-dev-127-0-0-2, with InternalIP
//     127.0.0.N and a Ready condition) and binds the Pod to it through the pods/binding
//     subresource. One Node per Pod address keeps the Kubernetes model faithful: a Pod's hostIP
//     is its node's address, so a host port is reached on the Pod's own address;
//   - starts each container's binary with the container's command and args and an environment
//     resolved as the kubelet resolves it (literal values with $(VAR) expansion, envFrom,
//     secretKeyRef, configMapKeyRef, and fieldRef for metadata, spec.nodeName and the Pod's IPs);
//   - reports phase, podIP(s), hostIP(s), startTime, container statuses and the PodScheduled,
//     Initialized, ContainersReady and Ready conditions, with readiness (and liveness and
//     startup) from the containers' httpGet or tcpSocket probes;
//   - restarts exited containers per the restart policy (Always, OnFailure) with a short capped
//     back-off, or ends the Pod Succeeded or Failed;
//   - on deletion sends SIGTERM, waits the grace period (capped short for development), sends
//     SIGKILL, and then deletes the Pod object with grace period 0 so it disappears.
//
// Status is written with strategic-merge patches guarded by the resource version, retried a
// bounded number of times on conflict.
//
// Processes run in their own process group; when a container's main process exits, the rest of
// its group is killed, as a container's processes die with its init process. On Linux each
// process also gets a parent-death signal, so a crashed runner does not leak them, and a Runner
// that stops kills every process it started. Each container's stdout and stderr go, one
// timestamped and stream-prefixed line at a time, to <Dir>/<namespace>_<pod>_<uid>/<container>.log,
// which is also the process's working directory and HOME.
//
// Deviations from a real kubelet, all forced by running without containers or network
// namespaces:
//
//   - Processes share the host's network namespace, so the runner sets NETFLEET_BIND_ADDRESS
//     to the Pod's IP for every container (overriding the Pod's own value, e.g. 0.0.0.0), or two
//     game servers would fight over the same ports.
//   - There is no NAT from hostIP:hostPort to podIP:containerPort. Because the Pod's IP is its
//     node's IP, the runner instead has netfleet game servers serve their game port on the host
//     port directly: when NETFLEET_GAME_PORT names a container port that has a hostPort, the
//     runner sets NETFLEET_GAME_PORT to that hostPort. Other ports are served where the process
//     listens, i.e. on podIP:containerPort.
//   - A container's command[0] names a program inside its image; the runner runs the image's
//     mapped binary in its place, with command[1:] followed by args as arguments.
//   - The environment starts from PATH (the runner's), HOME (the Pod's directory) and HOSTNAME
//     (the Pod's name); there are no service environment variables. Volumes are not mounted,
//     resources are not enforced, and nodeSelector, affinity and taints are not considered.
//   - Pods with init containers, exec or gRPC probes, or resourceFieldRef or fileKeyRef env are
//     rejected as a kubelet rejects a Pod it cannot admit: phase Failed, reason UnsupportedPodSpec.
//   - Container logs are files, not served through the API (kubectl logs does not work), and no
//     Events are recorded.
//
// The package imports Kubernetes client libraries and api/netcode (for the game server's
// environment convention). It knows Pods, not GameServers: it must not import api/v1alpha1,
// controllers or gameserver/....
package podrunner
