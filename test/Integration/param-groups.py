# Parameter groups: memopt.export(model, args, path, optimizer=opt) records
# the torch.optim optimizer's groups, and the compiled step trains each
# parameter with its group's hyper-parameters:
#
# - nanoGPT's AdamW groups on the bundled GPT (weight decay 0.1 on the
#   tensors of two or more dimensions, none on biases and layer norms;
#   betas (0.9, 0.95)), and a third group with its own learning rate;
# - SGD with momentum in two groups (another lr and weight decay);
# - a parameter the optimizer does not hold is frozen.
#
# Each against PyTorch with the same optimizer through the parity oracle
# (5 steps and the first-step gradients). Bad input: a parameter in two
# groups, Adam with weight decay (L2, not AdamW's decoupled decay), AMSGrad,
# and --optimizer contradicting the exported optimizer.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: adamw: memopt.optimizer = "adamw", 26 parameters with their group's hyper-parameters
# CHECK: adamw: weight decay 0.1 on 10 updates, 0 on 16
# CHECK: adamw: trajectory: 5 losses and 26 tensors within the oracle
# CHECK: adamw: gradients: 26 tensors within the oracle
# CHECK: sgd: trajectory: 5 losses and 26 tensors within the oracle
# CHECK: sgd: gradients: 26 tensors within the oracle
# CHECK: sgd: frozen: transformer.ln_f.bias (not in any group)
# CHECK: two groups: ExportError: parameter 'transformer.h.0.ln_1.weight' is in two parameter groups of the optimizer
# CHECK: adam with decay: ExportError: optimizer Adam is not supported: memopt trains with torch.optim.AdamW or torch.optim.SGD
# CHECK: amsgrad: ExportError: parameter group 0 of the optimizer sets amsgrad=True, which memopt does not implement
# CHECK: contradiction: memopt-compile: --optimizer=sgd contradicts the optimizer the model was exported with ('adamw', memopt.optimizer)

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 5


def nanogpt_groups(model, torch):
    """nanoGPT's configure_optimizers, plus a group of its own lr."""
    params = dict(model.named_parameters())
    decay = [p for n, p in params.items() if p.dim() >= 2]
    no_decay = [p for n, p in params.items() if p.dim() < 2 and
                ".ln_f." not in n]
    final = [p for n, p in params.items() if ".ln_f." in n]
    return [{"params": decay, "weight_decay": 0.1},
            {"params": no_decay, "weight_decay": 0.0},
            {"params": final, "weight_decay": 0.0, "lr": 3e-3}]


def adamw_factory(torch, groups_of):
    def make(parameters):
        model_params = list(parameters)
        return torch.optim.AdamW(groups_of(model_params), lr=1e-3,
                                 betas=(0.9, 0.95), eps=1e-8)
    return make


def check(label, oracle, mlir, plain, workdir):
    """The trajectory of MLIR compiled with its own optimizer, and the
    first-step gradients read from PLAIN, the same model exported without
    one (first_step_gradients compiles SGD at lr 1024, which MLIR's
    recorded optimizer would refuse; the gradients do not depend on the
    groups)."""
    import memopt
    out = os.path.join(workdir, "out-" + label)
    memopt_run.compile_model(mlir, out)
    final = os.path.join(workdir, "final.safetensors")
    stdout = memopt_run.train(out, workdir, STEPS, save=final)
    verdicts = [("trajectory", oracle.check(memopt_run.losses(stdout),
                                             memopt.safetensors.load(final))),
                ("gradients", oracle.check_gradients(
                    *memopt_run.first_step_gradients(
                        plain, workdir, os.path.join(workdir, "out-sgd"))))]
    for what, verdict in verdicts:
        for failure in verdict.failures:
            print("%s: MISMATCH %s: %s" % (label, what, failure))
        if verdict.ok:
            print("%s: %s: %s" % (label, what, verdict.summary()))


def main():
    import torch
    import memopt
    from memopt.testing import Oracle
    workdir = sys.argv[1]
    src = os.path.join(os.path.dirname(__file__), "..", "..")
    sys.path.insert(0, os.path.join(src, "examples", "pytorch"))
    import models

    model, batch = models.build("gpt")
    plain = os.path.join(workdir, "plain.mlir")
    memopt.export(model, tuple(batch.values()), plain)
    os.replace(os.path.join(workdir, "plain.safetensors"),
               os.path.join(workdir, "model.safetensors"))

    def by_position(groups_for_model):
        """A factory for the oracle's copies: the groups of `model`, by
        parameter position, applied to a copy's parameters."""
        index = {id(p): i for i, p in enumerate(model.parameters())}
        template = groups_for_model(model, torch)

        def groups(copy_params):
            return [dict(g, params=[copy_params[index[id(p)]]
                                    for p in g["params"]])
                    for g in template]
        return groups

    # AdamW, nanoGPT's groups.
    optimizer = torch.optim.AdamW(nanogpt_groups(model, torch), lr=1e-3,
                                  betas=(0.9, 0.95), eps=1e-8)
    mlir = os.path.join(workdir, "adamw.mlir")
    memopt.export(model, tuple(batch.values()), mlir, optimizer=optimizer)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    text = open(mlir).read()
    print('adamw: %s, %d parameters with their group\'s hyper-parameters' % (
        re.search(r'memopt.optimizer = "\w+"', text).group(0),
        len(re.findall(r"memopt.hparams", text))))
    factory = adamw_factory(torch, by_position(nanogpt_groups))
    out = os.path.join(workdir, "out-adamw")
    memopt_run.compile_model(mlir, out)
    plan = open(os.path.join(out, "plan.mlir")).read()
    decays = re.findall(r'"memopt.adamw_update".*?weight_decay = ([0-9.e+-]+)',
                        plan)
    print("adamw: weight decay 0.1 on %d updates, 0 on %d" % (
        sum(float(d) == 0.1 for d in decays),
        sum(float(d) == 0.0 for d in decays)))
    check("adamw", Oracle(model, batch, STEPS, factory), mlir, plain,
          workdir)

    # SGD with momentum in two groups; lm_head.bias in none (frozen).
    def sgd_groups(m, torch):
        params = dict(m.named_parameters())
        first = [p for n, p in params.items() if ".h." in n]
        rest = [p for n, p in params.items() if ".h." not in n
                and n != "transformer.ln_f.bias"]
        return [{"params": first, "lr": 0.05, "weight_decay": 1e-3},
                {"params": rest}]
    groups = by_position(sgd_groups)

    def sgd_factory(parameters):
        return torch.optim.SGD(groups(list(parameters)), lr=0.02,
                               momentum=0.9)
    mlir = os.path.join(workdir, "sgd.mlir")
    memopt.export(model, tuple(batch.values()), mlir,
                  optimizer=torch.optim.SGD(sgd_groups(model, torch), lr=0.02,
                                            momentum=0.9))
    frozen = re.findall(r'memopt.role = "frozen", memopt.name = "([^"]+)"',
                        open(mlir).read())
    check("sgd", Oracle(model, batch, STEPS, sgd_factory), mlir, plain,
          workdir)
    print("sgd: frozen: %s (not in any group)" % ", ".join(frozen))

    # Bad input.
    def export_error(label, optimizer):
        try:
            memopt.export(model, tuple(batch.values()),
                          os.path.join(workdir, "bad.mlir"),
                          optimizer=optimizer)
            print("%s: exported" % label)
        except memopt.ExportError as e:
            print("%s: ExportError: %s" % (label, e))
    params = list(model.parameters())
    # torch.optim refuses a parameter in two groups when it builds them;
    # one added to a group afterwards reaches the exporter.
    twice = torch.optim.AdamW([{"params": params[:3]},
                               {"params": params[3:]}])
    twice.param_groups[1]["params"].append(params[2])
    export_error("two groups", twice)
    export_error("adam with decay", torch.optim.Adam(params,
                                                     weight_decay=0.1))
    export_error("amsgrad", torch.optim.AdamW(params, amsgrad=True))
    bad = subprocess.run(["memopt-compile", os.path.join(workdir,
                                                          "adamw.mlir"),
                          "--optimizer=sgd", "--report-only"],
                         capture_output=True, text=True)
    print("contradiction: %s" % bad.stderr.strip().splitlines()[0])


if __name__ == "__main__":
    main()
