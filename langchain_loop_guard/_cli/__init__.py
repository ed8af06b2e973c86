"""What a person types: the ``loop-guard`` command (:mod:`._main`), the offline demo
(:mod:`._demo`, its loops :mod:`._demo_kinds` and scripted apps :mod:`._demo_scenarios`) and the
``%loop_guard`` notebook magic (:mod:`._magic`).

May import: the standard library and anything in the package: the other rooms
(:mod:`langchain_loop_guard._core`, :mod:`langchain_loop_guard._replay`,
:mod:`langchain_loop_guard._integrations`), its top (``langchain_loop_guard`` for the version,
:mod:`langchain_loop_guard.testing` for the demo's scripted model), and ``langchain``,
``langchain_core``, ``langgraph`` and ``IPython``. Nothing in the package imports this room but
the top's ``__init__.py`` (the notebook magic, lazily) and ``__main__.py``.
"""
