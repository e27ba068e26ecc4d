// Package controllers holds netfleet's reconcilers and the operator's side of the game server's
// admin API. The GameServer reconciler creates each server's Pod, tracks its state and address,
// and pushes spec.netcode into the running process as live config (the pusher), re-pushing it
// whenever the process restarts.
//
// It imports api/v1alpha1, api/netcode, Kubernetes and controller-runtime. It must not import
// gameserver/...: the operator builds with CGO_ENABLED=0 and talks to game servers only over
// HTTP.
package controllers
