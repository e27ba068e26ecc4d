// Package controllers holds netfleet's reconcilers and the operator's side of the game server's
// admin API. The GameServer reconciler creates each server's Pod, tracks its state and address,
// and pushes spec.netcode into the running process as live config (the pusher), re-pushing it
// whenever the process restarts. The Fleet reconciler keeps each fleet's GameServers: it patches
// their netcode in place and creates and removes servers by a pure plan (planFleet) that never
// removes an Allocated one. The FleetAutoscaler reconciler sets a fleet's replicas from a buffer
// policy (pure: decideBuffer) or a webhook, on every change of the fleet and its servers. The
// Allocator marks Ready servers Allocated with resourceVersion-guarded writes; the
// GameServerAllocation reconciler and the allocator endpoint serve requests through it.
//
// It imports api/v1alpha1, api/netcode, Kubernetes and controller-runtime. It must not import
// gameserver/...: the operator builds with CGO_ENABLED=0 and talks to game servers only over
// HTTP.
package controllers
