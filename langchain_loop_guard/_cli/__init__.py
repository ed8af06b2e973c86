"""What a person types: the ``loop-guard`` command (:mod:`._main`), the offline demo
(:mod:`._demo`, its loops :mod:`._demo_kinds` and scripted apps :mod:`._demo_scenarios`) and the
``%loop_guard`` notebook magic (:mod:`._magic`).

May import: anything in the package (the top of the house: nothing in it imports this room
but ``langchain_loop_guard/__init__.py`` and ``__main__.py``).
"""
