"""The integrations: the guard inside LangChain and LangGraph.

One run life cycle (:mod:`._engine`, over the guards' shared runtime, :mod:`._runtime`) under
thin adapters: the callback handler (:mod:`._handler`, its runs :mod:`._callback_runs` and the
tree they are placed in :mod:`._run_tree`, a model's answer as it reads it
:mod:`._model_answer`, the threads its stops left to repair :mod:`._unrepaired`, a thread's
state shared by many workers :mod:`._thread_store`), the
agent middleware (:mod:`._middleware`) and the node guard (:mod:`._node`), the last two over one
graph pass (:mod:`._graph_guard`, :mod:`._graph_pass`, their state :mod:`._graph_state`). What the
guard writes into a history (:mod:`._guard_messages`, :mod:`._repair`), how a tool's outcome is
read from a message (:mod:`._outcomes`), a stop and its interrupt (:mod:`._stop`), the
callbacks that publish verdicts (:mod:`._publish`), the prompt hint (:mod:`._hint`), which
tools act as their annotations say (:mod:`._tool_kinds`), and what a loop cost, read from the
model answers' usage (:mod:`._cost`).

May import: the standard library, ``langchain_core``, ``langgraph``, ``langchain``,
``pydantic``, ``typing_extensions``, :mod:`langchain_loop_guard._core` and
:mod:`langchain_loop_guard._replay` (the recorder and the report a guard gives).
"""
