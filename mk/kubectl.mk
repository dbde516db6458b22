# kubectl through fleetgate (issue 15, src/api/kubeapi.c): tests/integration/kubectl_fleetgate.sh
# drives the real kubectl (on the machine, as for kubesim-kubectl) against fleetgate's TLS
# listener, with the plain build and then the ASan/UBSan build of the daemon (whose exit status
# on SIGTERM carries LSan's verdict). script(1) (bsdutils) gives `exec -it` its terminal.
DEB_PKGS += bsdutils openssl
TEST_STEPS += kubectl-fleetgate

.PHONY: kubectl-fleetgate kubectl-fleetgate-one
kubectl-fleetgate-one: $(DAEMON) $(KUBESIM)
	FLEETGATE=$(DAEMON) KUBESIM=$(KUBESIM) tests/integration/kubectl_fleetgate.sh

kubectl-fleetgate:
	$(MAKE) --no-print-directory kubectl-fleetgate-one
	$(MAKE) --no-print-directory SANITIZE=1 kubectl-fleetgate-one
