# Shared set-up of the real-PyTorch tests (tests/torch/*.sh): the e2e helpers,
# and the environment scripts/install-torch made. tests/run runs these scripts
# only when that environment exists.
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
TORCH_CACHE=${NCCLGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard}
TORCH_PY=$TORCH_CACHE/torch-venv/bin/python
TORCH_SITE=$("$TORCH_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
TORCH_LIB=$TORCH_SITE/torch/lib
# The names the shim wraps, from the one list of the API.
wrapped_names() { sed -nE 's/^NCCL_API(_VOID)?\((([^,]*, ){2})?([A-Za-z]+),.*/nccl\4/p' \
    "$ROOT/shim/intercept/nccl_api.def" | sort -u; }
# Under a sanitizer the preloaded runtime comes first and changes what binds
# where: these tests hold for the production build, and run on it alone (a
# script that preloads nothing sets TORCH_ANY_BUILD=1 and runs on both).
if [ -n "${SANITIZE:-}" ] && [ -z "${TORCH_ANY_BUILD:-}" ]; then
    skip "$(basename "$0" .sh)" "real PyTorch is checked on the plain build"
    finish
    exit 0
fi
