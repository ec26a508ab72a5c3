"""Server-sent events: framing, the observed event order and its quirks, resume, and how streams end."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity.client._models import parse_response
from pydantic_ai_perplexity.emulator import Emulator
from support.emulator import TERMINAL_EVENTS, frames, partial_frames, stream_events, wait_terminal


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e['type'] for e in events]


def test_a_stream_is_plain_data_frames_in_the_observed_order(client: httpx2.Client):
    with client.stream('POST', '/v1/agent', json={'input': 'EU AI Act timeline', 'effort': 'low', 'stream': True}) as r:
        assert r.status_code == 200 and r.headers['content-type'] == 'text/event-stream'
        raw = r.read()
    assert b'event:' not in raw and b'[DONE]' not in raw and b'\r' not in raw
    events = frames(raw)
    seqs = [e['sequence_number'] for e in events]
    assert seqs[0] == 0 and all(a < b for a, b in itertools.pairwise(seqs))
    assert seqs != list(range(len(seqs))) and 2 not in seqs  # gaps, like the live capture
    kinds = types(events)
    assert kinds[:3] == ['response.created', 'response.in_progress', 'response.reasoning.started']
    assert kinds[-1] == 'response.completed' and kinds.count('response.completed') == 1
    assert kinds.index('response.reasoning.stopped') < kinds.index('response.output_text.delta')
    created = events[0]['response']
    assert (created['status'], created['model'], created['output'], created['usage']) == (
        'in_progress',
        'low',
        [],
        None,
    )
    # per search: added as an internal search_web function_call, done as a search_results item in the same slot
    added = {e['output_index']: e['item'] for e in events if e['type'] == 'response.output_item.added'}
    done = {e['output_index']: e['item'] for e in events if e['type'] == 'response.output_item.done'}
    assert added.keys() == done.keys()
    searches = [i for i, item in added.items() if item['type'] == 'function_call']
    assert len(searches) == 2
    for i in searches:
        assert added[i]['name'] == 'search_web' and json.loads(added[i]['arguments'])['queries']
        assert done[i]['type'] == 'search_results'
        at = next(
            n for n, e in enumerate(events) if e['type'] == 'response.output_item.added' and e['output_index'] == i
        )
        assert kinds[at : at + 4] == [
            'response.output_item.added',
            'response.reasoning.search_queries',
            'response.reasoning.search_results',
            'response.output_item.done',
        ]
    query_events = [e for e in events if e['type'] == 'response.reasoning.search_queries']
    assert query_events[0]['thought'] == 'Searching the web...' and query_events[0]['call_id'].startswith('call_')
    fetch = [i for i, item in added.items() if item['type'] == 'fetch_url_results']
    assert fetch and done[fetch[0]]['contents']
    assert 'response.reasoning.fetch_url_queries' in kinds and 'response.reasoning.fetch_url_results' in kinds
    message_index = next(i for i, item in added.items() if item['type'] == 'message')
    assert added[message_index]['content'] is None
    deltas = ''.join(e['delta'] for e in events if e['type'] == 'response.output_text.delta')
    text_done = next(e for e in events if e['type'] == 'response.output_text.done')
    assert kinds.count('response.output_text.delta') > 3 and deltas == text_done['text']
    assert done[message_index]['content'][0]['text'] == deltas
    final = events[-1]['response']
    assert final['status'] == 'completed' and final['model'] == 'openai/gpt-6-luna' and final['usage']
    assert [item['type'] for item in final['output']] == [done[i]['type'] for i in sorted(done)]
    assert 'function_call' not in {item['type'] for item in final['output']}
    assert parse_response(final).output_text == deltas
    assert client.get(f'/v1/agent/{final["id"]}').json() == final


def test_resume_gives_exactly_the_events_after_the_cursor(client: httpx2.Client):
    body = {'input': 'Artemis program [[emulate: duration=50]]', 'effort': 'medium', 'background': True, 'stream': True}
    full = stream_events(client, 'POST', '/v1/responses', json=body)
    rid = full[0]['response']['id']
    for cursor in (0, 2, full[5]['sequence_number'], full[-2]['sequence_number']):
        resumed = stream_events(
            client, 'GET', f'/v1/responses/{rid}', params={'stream': 'true', 'starting_after': cursor}
        )
        assert resumed == [e for e in full if e['sequence_number'] > cursor]
    from_start = stream_events(client, 'GET', f'/v1/agent/{rid}', params={'stream': 'true'})
    assert from_start == full
    at_end = stream_events(
        client, 'GET', f'/v1/agent/{rid}', params={'stream': 'true', 'starting_after': full[-1]['sequence_number']}
    )
    assert at_end == []


def test_resume_waits_for_future_events_of_a_running_run(client: httpx2.Client):
    body = {
        'input': 'Mars sample return [[emulate: duration=150]]',
        'effort': 'medium',
        'background': True,
        'stream': True,
    }
    with client.stream('POST', '/v1/agent', json=body) as r:
        raw = b''
        for chunk in r.iter_bytes():
            raw += chunk
            if raw.count(b'\n\n') >= 4:
                break  # the client goes away early
    seen = partial_frames(raw)
    rid = seen[0]['response']['id']
    last = seen[-1]['sequence_number']
    rest = stream_events(client, 'GET', f'/v1/agent/{rid}', params={'stream': 'true', 'starting_after': last})
    assert rest[0]['sequence_number'] > last and rest[-1]['type'] == 'response.completed'
    everything = stream_events(client, 'GET', f'/v1/agent/{rid}', params={'stream': 'true', 'starting_after': 0})
    assert [e for e in everything if e['sequence_number'] <= last] == [e for e in seen if e['sequence_number'] > 0]
    assert [e for e in everything if e['sequence_number'] > last] == rest


def test_bad_resume_requests_are_400(client: httpx2.Client):
    background = client.post('/v1/agent', json={'input': 'q', 'effort': 'fast', 'background': True}).json()
    done = wait_terminal(client, background['id'])
    last = done_last_seq = max(
        e['sequence_number'] for e in stream_events(client, 'GET', f'/v1/agent/{done["id"]}', params={'stream': 'true'})
    )
    past = client.get(f'/v1/agent/{done["id"]}', params={'stream': 'true', 'starting_after': last + 1})
    assert past.status_code == 400 and past.json()['error']['type'] == 'invalid_request'
    assert done_last_seq == last
    blocking = client.post('/v1/agent', json={'input': 'q', 'effort': 'fast'}).json()
    refused = client.get(f'/v1/agent/{blocking["id"]}', params={'stream': 'true', 'starting_after': 0})
    assert refused.status_code == 400 and 'background' in refused.json()['error']['message']
    unknown = 'resp_00000000-0000-0000-0000-000000000000'
    assert client.get(f'/v1/agent/{unknown}', params={'stream': 'true', 'starting_after': 0}).status_code == 404
    assert client.get('/v1/agent/resp_nope', params={'stream': 'true', 'starting_after': 0}).status_code == 400


def test_an_expired_resume_window_is_400_and_plain_retrieve_still_works():
    with (
        Emulator(time_scale=0, resume_window_seconds=0.02) as emu,
        httpx2.Client(base_url=emu.base_url, headers={'Authorization': f'Bearer {emu.api_key}'}) as client,
    ):
        rid = client.post('/v1/agent', json={'input': 'q', 'effort': 'fast', 'background': True}).json()['id']

        def status() -> int:
            return client.get(f'/v1/agent/{rid}', params={'stream': 'true', 'starting_after': 0}).status_code

        from support.emulator import poll

        poll(lambda: {'s': status()}, lambda r: r['s'] == 400)
        expired = client.get(f'/v1/agent/{rid}', params={'stream': 'true', 'starting_after': 0}).json()['error']
        assert expired['type'] == 'invalid_request' and 'expired' in expired['message']
        assert client.get(f'/v1/agent/{rid}').json()['status'] == 'completed'


def test_a_cancelled_stream_ends_with_response_cancelled(client: httpx2.Client):
    body = {
        'input': 'Survey [[emulate: duration=3000]]',
        'effort': 'xhigh',
        'max_output_tokens': 900,
        'background': True,
        'stream': True,
    }
    with client.stream('POST', '/v1/agent', json=body) as r:
        raw = b''
        for chunk in r.iter_bytes():
            if not raw:
                rid = json.loads(chunk.split(b'\n\n')[0][6:])['response']['id']
                assert client.post(f'/v1/agent/{rid}/cancel').json()['status'] == 'cancelling'
            raw += chunk
    events = frames(raw)
    assert events[-1]['type'] == 'response.cancelled'
    assert events[-1]['response']['status'] == 'cancelled' and events[-1]['response']['error']['code'] == 'cancelled'
    seqs = [e['sequence_number'] for e in events]
    assert seqs == sorted(set(seqs))
    assert types(events).count('response.cancelled') == 1 and 'response.completed' not in types(events)


@pytest.mark.parametrize(
    ('directive', 'last', 'status'),
    [('fail', 'response.failed', 'failed'), ('incomplete', 'response.incomplete', 'incomplete')],
)
def test_failed_and_incomplete_streams_end_with_their_event(
    client: httpx2.Client, directive: str, last: str, status: str
):
    body = {'input': f'Heat pumps [[emulate: {directive}]]', 'effort': 'low', 'stream': True}
    events = stream_events(client, 'POST', '/v1/agent', json=body)
    end = events[-1]
    assert end['type'] == last and sum(e['type'] in TERMINAL_EVENTS for e in events) == 1
    if directive == 'fail':
        assert 'response' not in end and end['error']['code'] == 'upstream_error' and end['error']['message']
        assert 'response.output_text.delta' not in types(events)
    else:
        assert end['response']['status'] == 'incomplete'
        assert end['response']['incomplete_details'] == {'reason': 'max_output_tokens'}
    rid = events[0]['response']['id']
    stored = client.get(f'/v1/agent/{rid}').json()
    assert stored['status'] == status
    if directive == 'fail':
        assert stored['error'] == end['error'] and stored['output'] == [] and stored['usage'] is None


def test_remote_mcp_items_are_streamed(client: httpx2.Client):
    tools = [{'type': 'mcp', 'server_label': 'docs', 'server_url': 'https://mcp.example.com/mcp'}]
    events = stream_events(
        client, 'POST', '/v1/agent', json={'input': 'EU AI Act', 'effort': 'fast', 'stream': True, 'tools': tools}
    )
    items = [(e['type'], e['item']['type']) for e in events if e['type'].startswith('response.output_item')]
    assert items[:2] == [
        ('response.output_item.added', 'mcp_list_tools'),
        ('response.output_item.done', 'mcp_list_tools'),
    ]
    assert ('response.output_item.added', 'mcp_call') in items and ('response.output_item.done', 'mcp_call') in items
    call_done = next(
        e['item'] for e in events if e['type'] == 'response.output_item.done' and e['item']['type'] == 'mcp_call'
    )
    assert call_done['output'] and call_done['error'] is None and json.loads(call_done['arguments'])


def test_a_client_leaving_mid_stream_does_not_disturb_the_server(client: httpx2.Client):
    body = {'input': 'Heat pumps [[emulate: duration=100]]', 'effort': 'low', 'background': True, 'stream': True}
    with client.stream('POST', '/v1/agent', json=body) as r:
        first = next(r.iter_bytes())
    rid = json.loads(first.split(b'\n\n')[0][6:])['response']['id']
    assert wait_terminal(client, rid)['status'] == 'completed'
    assert client.get('/v1/models').status_code == 200


def test_a_fast_stream_matches_the_live_capture(client: httpx2.Client):
    """vercel/ai `packages/perplexity/src/__fixtures__/agent-web-search.chunks.txt` (a live `fast` run): created(0),
    in_progress(1), then the search at 3 with no `reasoning.started`/`stopped`; `fast` resolves to
    `openai/gpt-6-luna` with 10 results per search (`agent-web-search.json`)."""
    # Stand-in pages on an allow-listed domain fill the search, so the per-search count is what bounds it.
    tools = [{'type': 'web_search', 'filters': {'search_domain_filter': ['example.org']}}]
    body = {'input': 'EU AI Act timeline', 'effort': 'fast', 'stream': True, 'tools': tools}
    events = stream_events(client, 'POST', '/v1/agent', json=body)
    kinds = types(events)
    assert 'response.reasoning.started' not in kinds and 'response.reasoning.stopped' not in kinds
    assert [(e['type'], e['sequence_number']) for e in events[:3]] == [
        ('response.created', 0),
        ('response.in_progress', 1),
        ('response.output_item.added', 3),
    ]
    assert events[2]['item']['type'] == 'function_call' and events[2]['item']['name'] == 'search_web'
    done = events[-1]['response']
    assert done['model'] == 'openai/gpt-6-luna'
    assert [len(i['results']) for i in done['output'] if i['type'] == 'search_results'] == [10]
    slower = stream_events(client, 'POST', '/v1/agent', json={**body, 'effort': 'low'})
    assert {'response.reasoning.started', 'response.reasoning.stopped'} <= set(types(slower))
