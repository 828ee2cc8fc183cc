// Package deploytest tests what operators apply from deploy/: the alert
// rules against their unit tests, the Kubernetes base as kustomize builds
// it, and the Prometheus rule object. It has no code of its own; it lives
// apart so that its heavy test dependencies (Prometheus, Kubernetes,
// kustomize) are compiled only for its own tests.
package deploytest
