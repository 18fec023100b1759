# Sourced by the bench scripts that run real Python clients: makes
# $root/target/bench-clients/venv once from the tests' pins
# (integration-tests/clients/python/requirements.txt) and sets $venv to it.
# Needs $root, the workspace root.
venv=$root/target/bench-clients/venv
if [[ ! -x $venv/bin/python ]]; then
    rm -rf "$venv.partial"
    python3 -m venv "$venv.partial"
    "$venv.partial/bin/python" -m pip install --no-input --disable-pip-version-check \
        --require-hashes --only-binary :all: -r "$root/integration-tests/clients/python/requirements.txt"
    mv "$venv.partial" "$venv"
fi
