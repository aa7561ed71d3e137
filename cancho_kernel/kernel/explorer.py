"""``%%bench --interactive --arg SIZE=64:4096``: a bench you can move.

How a value reaches the program: every ``{SIZE}`` in the cell's text is replaced by the slider's
value (an integer literal) before the cell is checked and compiled, and every ``{SIZE}`` in
``--args`` is replaced too, so the named programs compared with the cell (C baselines included)
can take the value as a command-line argument. Several ``--arg`` give several sliders.

Above the plot: one slider per ``--arg`` (``continuous_update=False``: a rerun when the slider is
released, not on every pixel), a backend dropdown (jit / exe, for the cell's program) and a stdout
dropdown. A change rebuilds the cell's program with the new values, benches everything again
(``--runs``, default 3 here) and replaces the plot and the table, two outputs with a
``display_id`` each, through ``update_display_data``. A refusal, a failed run or an interrupt
replaces the plot by a line saying so; the controls stay usable.

The widgets keep the explorer alive (ipywidgets holds every open widget, and each control's
observer is a bound method of the explorer), so nothing else needs to.

The cell's items join the session once (the first build); reruns never change the session.
"""

from __future__ import annotations

import dataclasses
import html
import uuid

from . import plots
from . import presentation as P
from .bench import (BENCH_TARGETS, BenchFailed, BenchInterrupted, BenchOptions, cancho_program, run_bench,
                    substitute)
from .directives import Body, Context
from .runner import BACKENDS



class Explorer:
    def __init__(self, ctx: Context, body: Body, opts: BenchOptions, others: list) -> None:
        import ipywidgets as W

        self.ctx, self.body, self.opts, self.others = ctx, body, opts, others
        self.values = {name: lo for name, lo, _hi, _step in opts.ranges}
        self.backend = opts.backends[0]
        self.stdout = opts.stdout
        self.plot_id = uuid.uuid4().hex
        self.table_id = uuid.uuid4().hex
        self.reruns = 0
        self.sliders = {name: W.IntSlider(value=lo, min=lo, max=hi, step=step, description=name,
                                          continuous_update=False)
                        for name, lo, hi, step in opts.ranges}
        self.backend_box = W.Dropdown(options=list(BACKENDS), value=self.backend, description="backend")
        targets = list(BENCH_TARGETS) if self.stdout in BENCH_TARGETS else [self.stdout, *BENCH_TARGETS]
        self.stdout_box = W.Dropdown(options=targets, value=self.stdout, description="stdout")
        self.controls = W.VBox([W.HBox(list(self.sliders.values())), W.HBox([self.backend_box, self.stdout_box])])
        for w in (*self.sliders.values(), self.backend_box, self.stdout_box):
            w.observe(self._changed, names="value")

    # -- one measurement -----------------------------------------------------------------------------

    def _compute(self, commit: bool) -> plots.BenchDisplays:
        session = self.ctx.session
        text = substitute(self.body.text, self.values)
        source = session.new_source(text, self.body.line_offset, self.body.path or self.body.cell_name)
        outcome = session.process(source, compile=True, use_last_main=True)
        if not outcome.ok:
            raise BenchFailed(P.refusal(outcome.diagnostics))
        if outcome.ir is None:
            raise BenchFailed(P.simple_failure("directive-error", "%%bench --interactive: no `main` yet: write "
                                                                  "`fn main(world: World) -> [] int` in the cell"))
        if commit:
            session.commit(outcome)
        prog = cancho_program(self.ctx, "cell", outcome.ir, self.backend, outcome.timings, source.path,
                              source=text)
        opts = dataclasses.replace(self.opts, stdout=self.stdout, backends=(self.backend,))
        try:
            doc = run_bench(self.ctx, [(prog, "cell"), *self.others], opts, dict(self.values),
                            show_progress=commit)
        finally:
            if prog.path is not None:  # a rerun's binary is not kept
                try:
                    prog.path.unlink()
                except OSError:
                    pass
        doc["explorer"] = {"backend": self.backend, "reruns": self.reruns}
        return plots.displays(doc)

    def start(self) -> None:
        data = dict(self.controls._repr_mimebundle_())
        data["text/plain"] = "bench explorer controls: " + ", ".join(self.sliders) + ", backend, stdout"
        self.ctx.display(data)
        try:
            shown = self._compute(commit=True)
        except BenchFailed as e:
            self.ctx.fail(e.failure)
            return
        except BenchInterrupted as e:
            self.ctx.fail(P.simple_failure("KeyboardInterrupt", f"bench interrupted after {e.done} of {e.total} "
                                                                "runs; the session is kept"))
            return
        plot = shown.plot or plots.Display(self._message("the plot needs matplotlib"), {})
        self.ctx.display(plot.data, plot.metadata, display_id=self.plot_id)
        self.ctx.display(shown.table.data, shown.table.metadata, display_id=self.table_id)

    # -- a control moved -------------------------------------------------------------------------------

    def _changed(self, change) -> None:
        self.values = {name: int(s.value) for name, s in self.sliders.items()}
        self.backend = self.backend_box.value
        self.stdout = self.stdout_box.value
        self.reruns += 1
        try:
            shown = self._compute(commit=False)
        except BenchFailed as e:
            shown = self._failed(f"{e.failure.ename}: {e.failure.evalue}")
        except (BenchInterrupted, KeyboardInterrupt):
            shown = self._failed("interrupted; move a control to measure again")
        except Exception as e:  # a bug of ours: say so in the display, keep the kernel
            shown = self._failed(f"internal: the kernel failed: {type(e).__name__}: {e}")
        plot = shown.plot or plots.Display(self._message("the plot needs matplotlib"), {})
        self.ctx.update(plot.data, plot.metadata, display_id=self.plot_id)
        self.ctx.update(shown.table.data, shown.table.metadata, display_id=self.table_id)

    def _failed(self, text: str) -> plots.BenchDisplays:
        """What replaces the plot and the table when a rerun did not measure."""
        line = self._message(text)
        return plots.BenchDisplays(plots.Display(line, {}), plots.Display({"text/plain": "", "text/html": ""}, {}))

    def _message(self, text: str) -> dict:
        vals = ", ".join(f"{k}={v}" for k, v in self.values.items())
        line = f"bench explorer ({vals}): {text}"
        return {"text/plain": line, "text/html": f"<pre>{html.escape(line)}</pre>"}


def start_explorer(ctx: Context, body: Body, opts: BenchOptions, others: list) -> None:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        ctx.fail(P.simple_failure("unavailable", "%%bench --interactive needs ipywidgets (pip install ipywidgets)"))
        return
    if body.blank:
        ctx.fail(P.simple_failure("directive-error", "%%bench --interactive explores the cell's own program: "
                                                     "write it in the cell, with {NAME} where the value goes"))
        return
    Explorer(ctx, body, opts, others).start()
