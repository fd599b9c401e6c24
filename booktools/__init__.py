"""The book's own tooling: what builds, executes, measures and checks the book. The book's chapters never import
it; the participant edition's chapters import :mod:`booktools.seat` for their first check.

==============  ====================================================================  =====================
module          what                                                                  command
==============  ====================================================================  =====================
``paths``       where the book's files are (the one place that finds the repository)
``notebooks``   notebook housekeeping: ready to publish?, execute in place
``freshness``   do a chapter's outputs still come from its code? (the book's note)
``records``     the three record stores (runs, claims, rehearsals): read, write, append
``runs``        measured runs (time, peak memory, claims), the README's table, needs  ``make execute``
``retire``      a run whose chapter was executed again, moved to ``runs/history/``   ``python -m ...retire``
``agendas``     the workshop's agendas: slots, and the chapters a participant runs
``teaching``    the teachers' page's tables, from the runs
``evidence``    the claims on record, the page Claims and evidence                    ``make compare``
``workshop``    the participant edition                                               ``make workshop``
``seat``        each chapter's first check in the edition, worded for a participant   ``make workshop``
``rehearse``    a workshop's seats run at once under MPS, and their records           ``make rehearse``
``room``        a room's servers, one a seat, one kernel each (``room_kernels``)      ``python -m ...room``
``plan``        the teacher's plan of one agenda, paced by the rehearsals, as a file  ``make workshop``
``diagrams``    the explanatory pictures in ``chapters/diagrams/``                    ``make diagrams``
``regenerate``  every generated file rewritten from the records                       ``make regenerate``
``doctor``      can this machine run the book?                                        ``make doctor``
``gpu_ready``   can this Python run a GPU target here? one line before it starts      ``make compare`` etc.
``mps``         one GPU shared by several processes under CUDA MPS limits             ``python -m ...mps``
``processes``   stopping the processes the tools start (seats, servers), and signals
``resolve``     uv's resolver for the ``gpu`` extra, installing nothing               ``make resolve-gpu``
``edition``     the book's version in the page header, and the site's downloads       ``make book``
==============  ====================================================================  =====================

It may import :mod:`support` (the chapters' package); :mod:`support` never imports it.
"""
